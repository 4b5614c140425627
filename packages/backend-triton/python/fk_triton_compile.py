#!/usr/bin/env python3
"""FastKernels' Triton compile helper.

A long-lived process that compiles Triton kernels for @fastkernels/backend-triton. It speaks JSON lines:
one request per line on stdin, one response per line on stdout, in order.

  {"id": 1, "op": "hello"}
    -> {"id": 1, "ok": true, "result": {"protocol": 1, "python": ..., "python_version": ..., "triton": "3.6.0"}}
  {"id": 2, "op": "compile", "source": "...", "filename": "add.py", "fn": "add_kernel",
   "signature": {"x": "*fp32", "n": "i32", "BLOCK": "constexpr"}, "constexprs": {"BLOCK": 1024},
   "attrs": {"x": [["tt.divisibility", 16]]}, "options": {"num_warps": 4, "num_stages": 3},
   "target": {"backend": "cuda", "arch": 90, "warp_size": 32}}
    -> {"id": 2, "ok": true, "result": {"name": ..., "cubin_b64": ..., "shared": ..., "ptx_params": [...], ...}}
  {"id": 3, "op": "shutdown"} -> {"id": 3, "ok": true, "result": {}} and the process exits.

Failures answer {"id": N, "ok": false, "error": {"kind": ..., "message": ..., "frames": [...]}} where kind is
no_triton, request, source, compile, ptxas, out_of_resources or internal. Compile errors carry frames with the
line in the submitted source (Triton's CompilationError counts lines from the kernel's `def`).

The helper never decides the kernel's parameter list: it returns the `.param` declarations of the compiled
kernel's PTX entry exactly as Triton emitted them (including the scratch pointers Triton 3.x appends), and the
caller maps them. Anything printed by Triton or by the kernel's module goes to stderr; stdout carries only the
protocol. End of input (the parent exited) ends the process.
"""
import base64
import hashlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback

PROTOCOL = 1


class HelperError(Exception):
    def __init__(self, kind, message, frames=None, detail=None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.frames = frames or []
        self.detail = detail

    def to_json(self):
        out = {"kind": self.kind, "message": self.message, "frames": self.frames}
        if self.detail:
            out["detail"] = self.detail
        return out


def _import_triton():
    try:
        import triton  # noqa: F401
        return triton
    except BaseException as e:  # ImportError, but also a broken install raising anything at import
        raise HelperError(
            "no_triton",
            "`import triton` failed in %s (Python %s): %s: %s" % (sys.executable, sys.version.split()[0], type(e).__name__, e),
        )


def _jsonable(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return repr(v)


def extract_ptx_params(ptx, name):
    """The `.param` declarations of the `.entry <name>(...)` prototype, in order, as written."""
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\(([^)]*)\)", ptx)
    if m is None:
        m = re.search(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)", ptx)
        if m is None:
            raise HelperError("internal", "the compiled PTX has no .entry for %r" % name)
        body = m.group(2)
    else:
        body = m.group(1)
    return [p.strip() for p in body.split(",") if p.strip()]


class Helper:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="fk-triton-")
        self.modules = {}

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------------------------------------ hello

    def hello(self):
        out = {
            "protocol": PROTOCOL,
            "python": sys.executable,
            "python_version": sys.version.split()[0],
            "pid": os.getpid(),
            "triton": None,
        }
        try:
            out["triton"] = _import_triton().__version__
        except HelperError as e:
            out["triton_error"] = e.message
        return out

    # ------------------------------------------------------------------------------------------------ source

    def load_source(self, source, filename):
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
        hit = self.modules.get(digest)
        if hit is not None:
            return hit
        base = re.sub(r"[^A-Za-z0-9_]", "_", os.path.splitext(os.path.basename(filename))[0]) or "kernel"
        path = os.path.join(self.tmp, "%s_%s.py" % (base, digest))
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        name = "fk_triton_src_%s" % digest
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # Triton's JIT looks its functions' globals up through the module
        try:
            spec.loader.exec_module(mod)
        except BaseException as e:
            sys.modules.pop(name, None)
            raise HelperError("source", "%s: %s" % (type(e).__name__, e), frames=_source_frames(e, path, filename))
        self.modules[digest] = (mod, path)
        return mod, path

    # ------------------------------------------------------------------------------------------------ compile

    def compile(self, req):
        triton = _import_triton()
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.runtime.jit import JITFunction

        fn_name = req.get("fn")
        source = req.get("source")
        if not isinstance(fn_name, str) or not isinstance(source, str):
            raise HelperError("request", "a compile request needs 'source' and 'fn' strings")
        filename = req.get("filename") or (fn_name + ".py")
        mod, path = self.load_source(source, filename)

        obj = getattr(mod, fn_name, None)
        if obj is None:
            found = sorted(k for k, v in vars(mod).items() if isinstance(v, JITFunction))
            raise HelperError("request", "the source defines no %r (its @triton.jit functions: %s)" % (fn_name, ", ".join(found) or "none"))
        jit = obj
        while not isinstance(jit, JITFunction) and hasattr(jit, "fn"):
            jit = jit.fn  # @triton.autotune / @triton.heuristics wrappers: compile the function they wrap
        if not isinstance(jit, JITFunction):
            raise HelperError("request", "%r is not a @triton.jit function (it is %s)" % (fn_name, type(obj).__name__))

        arg_names = list(jit.arg_names)
        constexpr_idx = set(jit.constexprs)
        sig_in = req.get("signature") or {}
        cx_in = req.get("constexprs") or {}
        if list(sig_in.keys()) != arg_names:
            raise HelperError("request", "the signature names %s but %s takes (%s)" % (list(sig_in.keys()), fn_name, ", ".join(arg_names)))
        py_params = inspect.signature(jit.fn).parameters
        signature, constexprs, used = {}, {}, {}
        for i, name in enumerate(arg_names):
            want_cx = sig_in[name] == "constexpr"
            if want_cx != (i in constexpr_idx):
                raise HelperError("request", "parameter %r is %sa tl.constexpr in the source but the request says otherwise" % (name, "" if i in constexpr_idx else "not "))
            signature[name] = sig_in[name]
            if not want_cx:
                continue
            if name in cx_in:
                value = _decode_constexpr(cx_in[name], triton)
            elif py_params[name].default is not inspect.Parameter.empty:
                value = py_params[name].default
            else:
                raise HelperError("request", "constexpr parameter %r of %s has no value: give it in constexprs (or in every config)" % (name, fn_name))
            constexprs[(i,)] = value
            used[name] = _jsonable(value)
        unknown = sorted(set(cx_in) - set(used))
        if unknown:
            raise HelperError("request", "constexprs given for %s, which %s does not declare as tl.constexpr" % (", ".join(unknown), fn_name))
        attrs = {}
        for name, specs in (req.get("attrs") or {}).items():
            if name not in arg_names:
                raise HelperError("request", "attrs for unknown parameter %r" % name)
            attrs[(arg_names.index(name),)] = [[k, v] for k, v in specs]

        target_in = req.get("target") or {}
        target = GPUTarget(target_in.get("backend", "cuda"), int(target_in.get("arch", 90)), int(target_in.get("warp_size", 32)))
        options = dict(req.get("options") or {})

        src = ASTSource(fn=jit, signature=signature, constexprs=constexprs, attrs=attrs)
        t0 = time.perf_counter()
        try:
            kernel = triton.compile(src, target=target, options=options)
        except BaseException as e:
            raise _compile_error(e, mod, path, filename, fn_name)
        compile_ms = (time.perf_counter() - t0) * 1000.0

        md = kernel.metadata
        md = md._asdict() if hasattr(md, "_asdict") else dict(md)
        name = md.get("name") or getattr(kernel, "name", fn_name)
        cubin = kernel.asm.get("cubin")
        ptx = kernel.asm.get("ptx")
        if not isinstance(cubin, (bytes, bytearray)) or not cubin:
            raise HelperError("internal", "Triton produced no cubin for %s (asm keys: %s)" % (fn_name, ", ".join(kernel.asm.keys())))
        if not isinstance(ptx, str):
            raise HelperError("internal", "Triton produced no PTX for %s: cannot read the kernel's parameter list" % fn_name)
        keep = {k: _jsonable(v) for k, v in md.items() if k not in ("target",)}
        tgt = md.get("target")
        if tgt is not None:
            keep["target"] = {"backend": getattr(tgt, "backend", None), "arch": _jsonable(getattr(tgt, "arch", None)), "warp_size": getattr(tgt, "warp_size", None)}
        return {
            "name": name,
            "cubin_b64": base64.b64encode(bytes(cubin)).decode("ascii"),
            "cubin_sha256": hashlib.sha256(bytes(cubin)).hexdigest(),
            "shared": int(md.get("shared", 0) or 0),
            "num_warps": int(md.get("num_warps", options.get("num_warps", 4))),
            "num_ctas": int(md.get("num_ctas", 1) or 1),
            "global_scratch_size": int(md.get("global_scratch_size", 0) or 0),
            "global_scratch_align": int(md.get("global_scratch_align", 1) or 1),
            "profile_scratch_size": int(md.get("profile_scratch_size", 0) or 0),
            "profile_scratch_align": int(md.get("profile_scratch_align", 1) or 1),
            "launch_cooperative_grid": bool(md.get("launch_cooperative_grid", False)),
            "launch_pdl": bool(md.get("launch_pdl", False)),
            "ptx_params": extract_ptx_params(ptx, name),
            "arg_names": arg_names,
            "constexpr_names": [arg_names[i] for i in sorted(constexpr_idx)],
            "constexprs": used,
            "signature": signature,
            "metadata": keep,
            "triton": triton.__version__,
            "compile_ms": compile_ms,
        }


def _decode_constexpr(v, triton):
    """JSON -> Python: 'tl.float32' names a triton.language attribute; {"float": x} forces a float."""
    if isinstance(v, str) and v.startswith("tl."):
        import triton.language as tl
        attr = getattr(tl, v[3:], None)
        if attr is None:
            raise HelperError("request", "constexpr value %r: triton.language has no %r" % (v, v[3:]))
        return attr
    if isinstance(v, dict) and set(v.keys()) == {"float"}:
        return float(v["float"])
    return v


def _source_frames(e, path, filename):
    if isinstance(e, SyntaxError) and e.filename == path and e.lineno:
        return [{"file": filename, "line": e.lineno, "column": e.offset, "message": e.msg}]
    frames = []
    for fr in traceback.extract_tb(e.__traceback__):
        if fr.filename == path:
            frames.append({"file": filename, "line": fr.lineno, "column": None, "function": fr.name, "message": None})
    if frames:
        frames[-1]["message"] = "%s: %s" % (type(e).__name__, e)
    return frames


def _def_line(jit):
    """The file line of the kernel's `def` (Triton numbers CompilationError lines from it)."""
    try:
        lines, start = inspect.getsourcelines(jit.fn)
    except (OSError, TypeError):
        return None
    for i, line in enumerate(lines):
        if line.strip().startswith("def "):
            return start + i
    return start


def _confirm_line(path, line, text):
    """`line` when the file has `text` there; else the nearest line that has it (should Triton ever count
    lines from elsewhere than the `def`); else `line`."""
    if not text or not text.strip():
        return line
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError:
        return line
    want = text.strip()
    if 0 < line <= len(lines) and lines[line - 1].strip() == want:
        return line
    near = [i + 1 for i, l in enumerate(lines) if l.strip() == want]
    return min(near, key=lambda n: abs(n - line)) if near else line


def _frames_of_compilation_error(exc, mod, path, filename):
    from triton.compiler.errors import CompilationError
    from triton.runtime.jit import JITFunction

    jits = [v for v in vars(mod).values() if isinstance(v, JITFunction)]
    frames, e, seen = [], exc, set()
    while isinstance(e, BaseException) and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, CompilationError):
            node = getattr(e, "node", None)
            rel = getattr(node, "lineno", None)
            col = getattr(node, "col_offset", None)
            src = getattr(e, "src", None)
            owner = next((j for j in jits if src is not None and getattr(j, "src", None) == src), None)
            text = None
            if src is not None and rel is not None:
                lines = src.split("\n")
                text = lines[rel - 1] if 0 < rel <= len(lines) else None
            line = None
            if owner is not None and rel is not None:
                d = _def_line(owner)
                line = None if d is None else _confirm_line(path, d + rel - 1, text)
            frames.append({
                "file": filename if owner is not None else None,
                "function": owner.fn.__name__ if owner is not None else None,
                "line": line,
                "column": None if col is None else col + 1,
                "fn_line": rel,
                "text": text,
                "message": getattr(e, "error_message", None),
            })
        e = e.__cause__
    return frames


def _compile_error(e, mod, path, filename, fn_name):
    if isinstance(e, HelperError):
        return e
    cls = type(e).__name__
    try:
        from triton.compiler.errors import CompilationError
    except BaseException:  # pragma: no cover
        CompilationError = ()
    if CompilationError and isinstance(e, CompilationError):
        frames = _frames_of_compilation_error(e, mod, path, filename)
        inner = next((f["message"] for f in reversed(frames) if f.get("message")), None)
        return HelperError("compile", inner or str(e), frames=frames, detail=str(e))
    if cls == "OutOfResources":
        return HelperError("out_of_resources", str(e))
    if cls == "PTXASError":
        return HelperError("ptxas", str(e))
    tb = traceback.format_exc(limit=12)
    return HelperError("compile", "%s: %s" % (cls, e), frames=_source_frames(e, path, filename), detail=tb)


def _protocol_stream():
    """A private handle on the real stdout for protocol lines; fd 1 (and sys.stdout) now go to stderr, so
    whatever Triton, ptxas wrappers or the kernel's module print cannot corrupt the protocol."""
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1, encoding="utf-8")


def main():
    out = _protocol_stream()
    helper = Helper()

    def send(msg):
        out.write(json.dumps(msg, separators=(",", ":")) + "\n")
        out.flush()

    try:
        stdin = sys.stdin.buffer
        while True:
            raw = stdin.readline()
            if not raw:
                break  # the parent closed our stdin (or exited): nothing more to do
            raw = raw.strip()
            if not raw:
                continue
            try:
                req = json.loads(raw.decode("utf-8"))
            except ValueError as e:
                send({"id": None, "ok": False, "error": {"kind": "request", "message": "not JSON: %s" % e, "frames": []}})
                continue
            rid = req.get("id")
            op = req.get("op")
            if op == "shutdown":
                send({"id": rid, "ok": True, "result": {}})
                break
            try:
                if op == "hello":
                    result = helper.hello()
                elif op == "compile":
                    result = helper.compile(req)
                else:
                    raise HelperError("request", "unknown op %r" % (op,))
                send({"id": rid, "ok": True, "result": result})
            except HelperError as e:
                send({"id": rid, "ok": False, "error": e.to_json()})
            except BaseException as e:  # keep serving: one bad request must not kill the helper
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                send({"id": rid, "ok": False, "error": {"kind": "internal", "message": "%s: %s" % (type(e).__name__, e), "frames": [], "detail": traceback.format_exc(limit=12)}})
    finally:
        helper.close()


if __name__ == "__main__":
    main()
