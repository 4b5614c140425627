#!/usr/bin/env python3
"""FastKernels' PyTorch candidate worker.

Runs one PyTorch candidate file (`L<k>/<stem>.py`, the original FastKernels / KernelBench format: a
`torch.nn.Module` with the production class name and signature) for the Node harness, which owns every
buffer, the baseline, the comparisons and the statistics. Started as

    python3 -u fk_torch_worker.py <fifo dir> <candidate.py> <display path> <class name>

Startup: imports torch, imports the candidate, finds its class, creates two FIFOs in <fifo dir>
(`req`, `resp`), prints ONE JSON line on stdout ({"ready": true, ...} or {"ready": false, "kind": ...}),
then opens `req` for reading and `resp` for writing and serves. Anything printed afterwards (by the candidate
or by torch) goes to stderr: stdout carries only that line.

Frames on the FIFOs: a 4-byte little-endian length, then that many bytes of UTF-8 JSON. Every request
{"seq": n, "op": ...} gets one answer {"seq": n, "ok": true, "result": {...}} or
{"seq": n, "ok": false, "error": {"kind", "type", "message", "file", "line", "traceback"}}. Kinds:
candidate (the candidate raised), hack (an anti-gaming check failed), request (a bad request), fatal
(a sticky device error: the worker cannot go on), internal.

Ops: init (build an instance with the task's init args, moved to the device and the case's float dtype),
bind (its parameters and buffers become views of the harness's, by name; what only one side has is reported, as
the original's load_state_dict(strict=False) skips it), forward (run; with "time": true, timed with
CUDA events on the worker's stream, the whole device synchronised before the host clock stops, and the
fixed cost of that path measured just before as host_fixed_ms; on the CPU a monotonic clock), collect (copy the pending outputs into host-given buffers), release, shutdown.

Between requests the worker sleeps on `req`, except for SPIN_AFTER_TIMED_S after a timed CUDA forward: then it polls
`req` instead (see _await_request), so each timed call launches from a CPU as busy as a PyTorch process launching
back to back.

Buffers: {"kind": "shm", "path", "bytes"} is a file in /dev/shm mapped MAP_SHARED (torch.frombuffer over
an mmap: no copy); {"kind": "cuda_ipc", "handle": hex, "bytes", "offset"} is a CUDA IPC handle of a host
allocation opened with cuIpcOpenMemHandle and wrapped by an object exposing __cuda_array_interface__
(torch.as_tensor: no copy). A tensor is {"buf": id, "buffer": {...} (first use only), "dtype", "shape",
"strides", "offset" (elements), "storage_bytes"}.
"""
import ctypes
import faulthandler
import importlib.util
import inspect
import json
import mmap
import os
import select
import signal
import struct
import sys
import threading
import time
import traceback

PROTOCOL = 1

# How long after a timed CUDA forward the worker polls its request channel instead of sleeping on it (seconds). The
# harness times calls back to back (its own work in between takes milliseconds), so this covers a whole timing loop and
# lets a finished one go back to sleeping soon after.
SPIN_AFTER_TIMED_S = 0.5


def _die_with_parent():
    """Linux: SIGKILL this process when the Node process that started it dies (watchdog kills, crashes)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class WorkerError(Exception):
    def __init__(self, kind, message, exc=None, tb=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.exc = exc
        self.tb = tb


def _candidate_frame(tb, path):
    """The deepest frame of a traceback in the candidate's folder: (file, line)."""
    folder = os.path.dirname(os.path.abspath(path))
    best = None
    for fr in traceback.extract_tb(tb):
        if os.path.abspath(fr.filename).startswith(folder + os.sep):
            best = fr
    return (best.filename, best.lineno) if best else (None, None)


def _error_json(kind, e, path, display):
    if isinstance(e, WorkerError):
        kind, msg, exc = e.kind, e.message, e.exc
    else:
        msg, exc = "%s: %s" % (type(e).__name__, e), e
    out = {"kind": kind, "type": type(exc).__name__ if exc is not None else None, "message": msg, "file": None, "line": None}
    if isinstance(exc, SyntaxError) and exc.filename and os.path.abspath(exc.filename) == os.path.abspath(path):
        out["file"], out["line"] = display, exc.lineno
    elif exc is not None and exc.__traceback__ is not None:
        f, line = _candidate_frame(exc.__traceback__, path)
        if f is not None:
            out["file"] = display if os.path.abspath(f) == os.path.abspath(path) else os.path.join(os.path.dirname(display), os.path.relpath(f, os.path.dirname(path)))
            out["line"] = line
        out["traceback"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=8))[-4000:]
    return out


# ---- dtypes --------------------------------------------------------------------------------------------

def _dtype_maps(torch):
    names = {
        "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
        "fp8e4m3": "float8_e4m3fn", "fp8e5m2": "float8_e5m2",
        "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8", "bool": "bool",
    }
    to_torch = {k: getattr(torch, v) for k, v in names.items() if hasattr(torch, v)}
    return to_torch, {v: k for k, v in to_torch.items()}


# ---- buffers -------------------------------------------------------------------------------------------

class _CudaArray:
    """A device allocation as __cuda_array_interface__ (bytes), for torch.as_tensor without a copy."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3, "strides": None}


class Buffers:
    def __init__(self, torch, device):
        self.torch = torch
        self.device = device
        self.by_id = {}
        self.maps = {}
        self.ipc = {}
        self.libcuda = None

    def _open_ipc(self, handle_hex):
        hit = self.ipc.get(handle_hex)
        if hit is not None:
            return hit
        if self.libcuda is None:
            self.libcuda = ctypes.CDLL("libcuda.so.1")
        raw = bytes.fromhex(handle_hex)
        if len(raw) != 64:
            raise WorkerError("request", "a CUDA IPC handle is 64 bytes, got %d" % len(raw))

        class CUipcMemHandle(ctypes.Structure):  # passed by value, as the driver API takes it
            _fields_ = [("reserved", ctypes.c_char * 64)]

        handle = CUipcMemHandle.from_buffer_copy(raw)
        ptr = ctypes.c_uint64(0)
        # torch's (primary) context current on this thread for the driver call
        self.torch.empty(1, device=self.device)
        # cuIpcOpenMemHandle_v2(CUdeviceptr*, CUipcMemHandle, flags = CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        fn = getattr(self.libcuda, "cuIpcOpenMemHandle_v2", None) or self.libcuda.cuIpcOpenMemHandle
        fn.argtypes = [ctypes.POINTER(ctypes.c_uint64), CUipcMemHandle, ctypes.c_uint]
        fn.restype = ctypes.c_int
        rc = fn(ctypes.byref(ptr), handle, ctypes.c_uint(1))
        if rc != 0:
            raise WorkerError("fatal", "cuIpcOpenMemHandle failed (CUresult %d)" % rc)
        self.ipc[handle_hex] = ptr.value
        return ptr.value

    def base(self, buf_id, desc):
        hit = self.by_id.get(buf_id)
        if hit is not None:
            return hit
        if desc is None:
            raise WorkerError("request", "buffer %r is not known to the worker and the request does not describe it" % (buf_id,))
        kind = desc.get("kind")
        n = int(desc["bytes"])
        if kind == "shm":
            fd = os.open(desc["path"], os.O_RDWR)
            try:
                m = mmap.mmap(fd, n, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) if n > 0 else None
            finally:
                os.close(fd)
            t = self.torch.frombuffer(m, dtype=self.torch.uint8) if m is not None else self.torch.empty(0, dtype=self.torch.uint8)
            self.maps[buf_id] = m
        elif kind == "cuda_ipc":
            ptr = self._open_ipc(desc["handle"]) + int(desc.get("offset", 0))
            t = self.torch.as_tensor(_CudaArray(ptr, n), device=self.device)
        else:
            raise WorkerError("request", "unknown buffer kind %r" % (kind,))
        self.by_id[buf_id] = t
        return t

    def release(self, ids):
        for i in ids:
            self.by_id.pop(i, None)
            self.maps.pop(i, None)  # the mmap closes when the last tensor over it goes


# ---- waiting for a request ------------------------------------------------------------------------------

def _await_request(fd, until, clock):
    """Return once `fd` has data to read or `clock()` passes `until`; reads nothing (the caller's blocking read does).

    Why not just block: a launch-bound op's CUDA-event time is the pace at which its Python launches kernels (the GPU
    waits on each launch), so it is only as fast as the CPU that runs the launches. A process that slept on a pipe since
    its last call wakes on an idle, clocked-down core with cold caches, or on the harness's own core (the kernel wakes a
    pipe reader where the writer ran), where a plain PyTorch loop never sleeps (its synchronize spins). On an H100 the
    torch stub's 32-token RMSNorm read 0.114 ms in the sleeping worker against 0.089 ms in such a loop, with nothing
    but the call between the events. Polling keeps this process running on its own core as that loop does; it touches
    no device and no candidate code, so the timed window holds exactly what it held before."""
    while clock() < until:
        if select.select([fd], [], [], 0)[0]:
            return


# ---- the worker ----------------------------------------------------------------------------------------

class Worker:
    def __init__(self, torch, cls, path, display):
        self.torch = torch
        self.cls = cls
        self.path = path
        self.display = display
        self.to_torch, self.from_torch = _dtype_maps(torch)
        self.modules = {}
        self.next_id = 1
        self.pending = None
        self.buffers = {}
        self.threads = threading.active_count()
        self.broken = None
        # until when the main loop polls for the next request (set by timed CUDA forwards; see _await_request)
        self.spin_until = 0.0

    # protected functions: captured before the candidate is imported, re-checked after every request
    def protect(self, table):
        self.protected = table
        self.snapshot = {k: (obj, name, getattr(obj, name)) for k, (obj, name) in table.items()}

    def patched(self):
        for k, (obj, name, fn) in self.snapshot.items():
            if getattr(obj, name, None) is not fn:
                return k
        return None

    def bufs(self, device):
        b = self.buffers.get(device)
        if b is None:
            b = self.buffers[device] = Buffers(self.torch, device)
        return b

    def tensor(self, d, device):
        if d is None:
            return None
        dt = self.to_torch.get(d["dtype"])
        if dt is None:
            raise WorkerError("request", "dtype %r has no torch dtype in torch %s" % (d["dtype"], self.torch.__version__))
        base = self.bufs(device).base(d["buf"], d.get("buffer"))
        item = self.torch.tensor([], dtype=dt).element_size()
        start = int(d.get("byte_offset", 0))
        nbytes = int(d["storage_bytes"])
        typed = base[start:start + nbytes].view(dt)
        return typed.as_strided(tuple(d["shape"]), tuple(d["strides"]), typed.storage_offset() + int(d["offset"]))

    def _storage_range(self, t):
        try:
            s = t.untyped_storage()
        except AttributeError:
            s = t.storage()
            return s.data_ptr(), s.size() * t.element_size()
        return s.data_ptr(), s.nbytes()

    # ---- ops ----

    def op_init(self, req):
        device = req.get("device", "cpu")
        args = [self._init_arg(v, p) for v, p in zip(req.get("args", []), req.get("params", [None] * len(req.get("args", []))))]
        with self.torch.no_grad():
            m = self.cls(*args)
            if not isinstance(m, self.torch.nn.Module):
                raise WorkerError("candidate", "%s(...) is a %s, not a torch.nn.Module" % (self.cls.__name__, type(m).__name__))
            dt = self.to_torch.get(req.get("dtype"))
            m = m.to(device)
            if dt is not None and dt.is_floating_point:
                m = m.to(dt)  # floating parameters and buffers only, as the original casts high-precision params
            m.eval()
        mid = self.next_id
        self.next_id += 1
        self.modules[mid] = (m, device)
        return {"id": mid, "state": {k: {"shape": list(v.shape), "dtype": self.from_torch.get(v.dtype)} for k, v in m.state_dict().items()}}

    def _init_arg(self, v, p):
        if p == "dtype" and isinstance(v, str) and v in self.to_torch:
            return self.to_torch[v]
        return v

    def op_bind(self, req):
        """Make the module's parameters and buffers the harness's own tensors (the baseline's, by name): whatever the
        harness loads into them (the bench's load_state_dict, the engine's weight loader) is what forward reads. A
        name only one side has is reported, as the original's load_state_dict(strict=False) would skip it."""
        torch = self.torch
        m, device = self.modules[req["id"]]
        given = req["tensors"]
        own = dict(m.named_parameters())
        own.update(dict(m.named_buffers()))
        for name, d in given.items():
            if name not in own:
                continue
            t = self.tensor(d, device)
            if tuple(own[name].shape) != tuple(t.shape):
                raise WorkerError("candidate", "'%s' is %s in the .py module, the baseline's is %s (keep the baseline's parameter names and shapes)" % (name, list(own[name].shape), list(t.shape)))
            owner = m
            *path, leaf = name.split(".")
            for part in path:
                owner = getattr(owner, part)
            if isinstance(own[name], torch.nn.Parameter):
                setattr(owner, leaf, torch.nn.Parameter(t, requires_grad=False))
            else:
                owner._buffers[leaf] = t
        return {"missing": sorted(k for k in own if k not in given), "unexpected": sorted(k for k in given if k not in own)}

    def _sync(self, device):
        if str(device).startswith("cuda"):
            self._cuda_sync()

    def _fixed_cost(self, stream):
        """The timing path's own cost with nothing between the events (two records, a device sync, the clock), run
        just before the timed call on an idle device. The harness subtracts it from the host clock before comparing
        that with the event time (work escaping the events). Without it a 4 us relu read 0.157 ms on the host clock
        against 0.004 ms of events on an H100 (plain PyTorch in its own process: 0.02 ms over the events), and the
        harness flagged honest candidates. A candidate cannot reach it: the functions used are the protected ones."""
        start, end = self._Event(enable_timing=True), self._Event(enable_timing=True)
        h0 = self._perf()
        self._record(start, stream)
        self._record(end, stream)
        self._cuda_sync()
        host_ms = (self._perf() - h0) * 1000.0
        return max(0.0, host_ms - self._elapsed(start, end))

    def op_forward(self, req):
        torch = self.torch
        m, device = self.modules[req["id"]]
        names = req.get("names") or []
        inputs = [self.tensor(d, device) for d in req.get("inputs", [])]
        host = req.get("host", [])
        timed = bool(req.get("time"))
        cuda = str(device).startswith("cuda")
        self.pending = None
        stream = torch.cuda.current_stream() if cuda else None
        ms = host_ms = None
        fixed_ms = 0.0
        with torch.no_grad():
            if cuda:
                self._cuda_sync()
                start, end = self._Event(enable_timing=True), self._Event(enable_timing=True)
                if timed:
                    fixed_ms = self._fixed_cost(stream)
                h0 = self._perf()
                self._record(start, stream)
                out = m(*inputs, *host)
                self._record(end, stream)
                self._cuda_sync()  # the whole device: work on side streams cannot escape the host clock
                host_ms = (self._perf() - h0) * 1000.0
                ms = self._elapsed(start, end)
                if torch.cuda.current_stream() != stream:
                    raise WorkerError("hack", "the candidate changed the worker's current CUDA stream")
                if timed:
                    self.spin_until = self._perf() + SPIN_AFTER_TIMED_S
            else:
                h0 = self._perf()
                out = m(*inputs, *host)
                host_ms = ms = (self._perf() - h0) * 1000.0
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        ranges = [(self._storage_range(t), names[i] if i < len(names) else str(i)) for i, t in enumerate(inputs) if t is not None]
        meta = []
        for i, o in enumerate(outs):
            if o is None:
                meta.append(None)
                continue
            if type(o) is not torch.Tensor:
                raise WorkerError("hack", "output %d is a %s, not a plain torch.Tensor" % (i, type(o).__name__))
            if o.device.type != torch.device(device).type:
                raise WorkerError("hack", "output %d is on %s, not on %s (a meta / fake / lazy tensor?)" % (i, o.device, device))
            if o.numel() > 0:
                p, n = self._storage_range(o)
                for (ip, inn), name in ranges:
                    if p < ip + inn and ip < p + n:
                        raise WorkerError("hack", "output %d shares memory with input '%s' (an input alias returned as the output)" % (i, name))
            dt = self.from_torch.get(o.dtype)
            if dt is None:
                raise WorkerError("candidate", "output %d has dtype %s, which the harness does not know" % (i, o.dtype))
            meta.append({"shape": list(o.shape), "dtype": dt})
        if threading.active_count() > self.threads:
            raise WorkerError("hack", "%d thread(s) started by the candidate are alive after its forward" % (threading.active_count() - self.threads))
        self.pending = (outs, device)
        r = {"outputs": meta, "tuple": isinstance(out, (tuple, list))}
        if timed:
            r["ms"] = ms
            r["host_ms"] = host_ms
            r["host_fixed_ms"] = fixed_ms
        return r

    def op_collect(self, req):
        if self.pending is None:
            raise WorkerError("request", "collect without a forward")
        outs, device = self.pending
        self.pending = None
        with self.torch.no_grad():
            for o, d in zip(outs, req.get("outputs", [])):
                if o is None or d is None:
                    continue
                dst = self.tensor(d, device)
                dst.copy_(o)
        self._sync(device)
        return {}

    def op_release(self, req):
        for mid in req.get("ids", []):
            self.modules.pop(mid, None)
        for device, b in self.buffers.items():
            b.release(req.get("buffers", []))
        return {}

    def handle(self, req):
        op = req.get("op")
        rel = req.get("release")
        if rel:
            for b in self.buffers.values():
                b.release(rel)
        if self.broken and op not in ("release", "shutdown"):
            raise WorkerError("fatal", "the worker hit a sticky device error earlier: %s" % self.broken)
        fn = getattr(self, "op_" + str(op), None) if op in ("init", "bind", "forward", "collect", "release") else None
        if fn is None:
            raise WorkerError("request", "unknown op %r" % (op,))
        return fn(req)


def _signature(fn, skip_self=True):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if skip_self and params and params[0].name == "self":
        params = params[1:]
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return {
        "names": [p.name for p in pos],
        "required": sum(1 for p in pos if p.default is p.empty),
        "varargs": any(p.kind == p.VAR_POSITIONAL for p in params),
    }


def _protocol_stream():
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1, encoding="utf-8")


def main():
    _die_with_parent()
    faulthandler.enable(file=sys.stderr, all_threads=True)
    fifo_dir, path, display, class_name = sys.argv[1:5]
    out = _protocol_stream()

    def hello(obj):
        out.write(json.dumps(obj, separators=(",", ":")) + "\n")
        out.flush()

    base = {"protocol": PROTOCOL, "python": sys.executable, "python_version": sys.version.split()[0]}
    try:
        import torch
    except BaseException as e:
        hello(dict(base, ready=False, kind="no_torch", message="`import torch` failed: %s: %s" % (type(e).__name__, e)))
        return 3
    base["torch"] = torch.__version__
    base["cuda"] = bool(torch.cuda.is_available())
    torch.set_grad_enabled(False)

    # ---- the functions the worker's clock and checks rely on, captured before the candidate exists ----
    table = {
        "time.perf_counter": (time, "perf_counter"),
        "time.perf_counter_ns": (time, "perf_counter_ns"),
        "time.monotonic": (time, "monotonic"),
        "torch.Tensor.copy_": (torch.Tensor, "copy_"),
        "torch.nn.Module.__call__": (torch.nn.Module, "__call__"),
        "torch.nn.Module.load_state_dict": (torch.nn.Module, "load_state_dict"),
        "torch.cuda.synchronize": (torch.cuda, "synchronize"),
        "torch.cuda.Event": (torch.cuda, "Event"),
        "torch.cuda.Event.record": (torch.cuda.Event, "record"),
        "torch.cuda.Event.elapsed_time": (torch.cuda.Event, "elapsed_time"),
        "torch.cuda.current_stream": (torch.cuda, "current_stream"),
        "threading.active_count": (threading, "active_count"),
    }
    for k in ("op_init", "op_bind", "op_forward", "op_collect", "op_release", "handle", "tensor", "patched", "_storage_range"):
        table["Worker.%s" % k] = (Worker, k)
    table["Buffers.base"] = (Buffers, "base")

    # ---- the candidate -------------------------------------------------------------------------------
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    sys.path.insert(0, os.path.dirname(folder))
    mod_name = "fk_candidate_" + "".join(c if c.isalnum() else "_" for c in os.path.splitext(os.path.relpath(path, os.path.dirname(folder)))[0])
    snap = {k: getattr(o, n) for k, (o, n) in table.items()}
    try:
        spec = importlib.util.spec_from_file_location(mod_name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = mod
        spec.loader.exec_module(mod)
    except BaseException as e:
        hello(dict(base, ready=False, kind="import", error=_error_json("candidate", e, path, display)))
        return 4
    bad = next((k for k, (o, n) in table.items() if getattr(o, n, None) is not snap[k]), None)
    if bad is not None:
        hello(dict(base, ready=False, kind="hack", error={"kind": "hack", "message": "tried to patch a protected harness function: %s (at import)" % bad, "file": display, "line": None}))
        return 5
    cls = getattr(mod, class_name, None)
    classes = sorted(k for k, v in vars(mod).items() if inspect.isclass(v) and v.__module__ == mod_name)
    if cls is None or not inspect.isclass(cls):
        found = ("it defines %s" % ", ".join(classes)) if classes else "it defines no class"
        hello(dict(base, ready=False, kind="no_class", error={"kind": "candidate", "message": "no class named '%s' (%s)" % (class_name, found), "file": display, "line": None}))
        return 4
    try:
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        line = None
    if not issubclass(cls, torch.nn.Module):
        hello(dict(base, ready=False, kind="no_class", error={"kind": "candidate", "message": "class %s does not extend torch.nn.Module" % class_name, "file": display, "line": line}))
        return 4

    w = Worker(torch, cls, path, display)
    w.protect(table)
    w._perf = time.perf_counter
    w._cuda_sync = torch.cuda.synchronize
    w._Event = torch.cuda.Event
    w._record = lambda ev, stream, _rec=torch.cuda.Event.record: _rec(ev, stream)
    w._elapsed = torch.cuda.Event.elapsed_time

    req_path, resp_path = os.path.join(fifo_dir, "req"), os.path.join(fifo_dir, "resp")
    os.mkfifo(req_path, 0o600)
    os.mkfifo(resp_path, 0o600)
    hello(dict(base, ready=True, pid=os.getpid(), line=line, init=_signature(cls.__init__), forward=_signature(cls.forward)))
    out.close()
    rfd = os.open(req_path, os.O_RDONLY)
    wfd = os.open(resp_path, os.O_WRONLY)

    def read_exact(n):
        chunks, got = [], 0
        while got < n:
            b = os.read(rfd, n - got)
            if not b:
                return None
            chunks.append(b)
            got += len(b)
        return b"".join(chunks)

    def send(obj):
        body = json.dumps(obj, separators=(",", ":"), allow_nan=True).encode("utf-8")
        data = struct.pack("<I", len(body)) + body
        view = memoryview(data)
        while view:
            n = os.write(wfd, view)
            view = view[n:]

    while True:
        _await_request(rfd, w.spin_until, w._perf)
        head = read_exact(4)
        if head is None:
            return 0  # the host closed the channel (or died): nothing more to do
        body = read_exact(struct.unpack("<I", head)[0])
        if body is None:
            return 0
        try:
            req = json.loads(body.decode("utf-8"))
        except ValueError as e:
            send({"seq": None, "ok": False, "error": {"kind": "request", "message": "not JSON: %s" % e}})
            continue
        seq = req.get("seq")
        if req.get("op") == "shutdown":
            send({"seq": seq, "ok": True, "result": {}})
            return 0
        try:
            result = w.handle(req)
            bad = w.patched()
            if bad is not None:
                raise WorkerError("hack", "tried to patch a protected harness function: %s" % bad)
            send({"seq": seq, "ok": True, "result": result})
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            bad = w.patched()
            if bad is not None:
                e = WorkerError("hack", "tried to patch a protected harness function: %s" % bad)
            kind = e.kind if isinstance(e, WorkerError) else "candidate"
            msg = str(e)
            if kind == "candidate" and ("CUDA error" in msg or "illegal memory access" in msg or "device-side assert" in msg):
                kind = "fatal"
                w.broken = msg.splitlines()[0] if msg else type(e).__name__
            send({"seq": seq, "ok": False, "error": _error_json(kind, e, path, display)})


if __name__ == "__main__":
    sys.exit(main())
