import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { torchWorkerScript } from './channel.js';

/**
 * The worker's wait for its next request (python/fk_torch_worker.py, _await_request and Worker.spin_until): after a
 * timed CUDA forward it polls its request channel instead of sleeping on it, so the next timed call launches from a
 * running CPU (a launch-bound op's event time is its launch pace). Runs the worker module in plain Python (it imports
 * torch only in main()); the CUDA forward runs against a stand-in torch with no device.
 */
const PROBE = String.raw`
import contextlib, importlib.util, json, os, sys, threading, time, types
spec = importlib.util.spec_from_file_location("fk_worker", sys.argv[1])
w = importlib.util.module_from_spec(spec)
spec.loader.exec_module(w)
clock = time.perf_counter
out = {"spin_s": w.SPIN_AFTER_TIMED_S}

# count the polls: a wait that sleeps would make one call at most
real_select, polls = w.select.select, [0]
def counting(*a):
    polls[0] += 1
    return real_select(*a)
w.select = types.SimpleNamespace(select=counting)

r, wr = os.pipe()
t0 = clock()
w._await_request(r, t0 + 0.2, clock)
out["idle_wall"], out["idle_polls"] = clock() - t0, polls[0]

threading.Timer(0.05, lambda: os.write(wr, b"x")).start()
t0 = clock()
w._await_request(r, t0 + 10, clock)
out["woken_after"] = clock() - t0
out["left_for_reader"] = os.read(r, 1).decode()

t0 = clock()
w._await_request(r, 0.0, clock)
out["past_deadline"] = clock() - t0

os.close(wr)
t0 = clock()
w._await_request(r, clock() + 10, clock)
out["eof_after"] = clock() - t0

# op_forward against a stand-in torch: what it touches with no inputs and a None output
class Event:
    def __init__(self, enable_timing=False):
        pass
cuda = types.SimpleNamespace(current_stream=lambda: "stream")
torch = types.SimpleNamespace(no_grad=contextlib.nullcontext, cuda=cuda, Tensor=object, device=lambda d: types.SimpleNamespace(type=str(d).split(":")[0]))
worker = w.Worker.__new__(w.Worker)
worker.torch, worker.to_torch, worker.from_torch = torch, {}, {}
worker.modules, worker.pending, worker.buffers, worker.broken = {}, None, {}, None
worker.threads, worker.spin_until = threading.active_count(), 0.0
worker._perf, worker._cuda_sync, worker._Event = clock, lambda: None, Event
worker._record, worker._elapsed = (lambda ev, stream: None), (lambda a, b: 0.01)
worker.modules[1] = (lambda *a: None, "cuda:0")
worker.modules[2] = (lambda *a: None, "cpu")
def spin_after(mid, timed):
    worker.spin_until = 0.0
    t0 = clock()
    worker.op_forward({"id": mid, "inputs": [], "time": timed})
    return worker.spin_until - t0 if worker.spin_until else 0.0
out["cuda_timed"], out["cuda_untimed"], out["cpu_timed"] = spin_after(1, True), spin_after(1, False), spin_after(2, True)
print(json.dumps(out))
`;

const PYTHON = ['python3', '/usr/bin/python3'].find((p) => spawnSync(p, ['-c', 'import select'], { timeout: 20_000 }).status === 0);
if (!PYTHON) console.warn('skipping the PyTorch worker wait tests: no python3 here');

describe.skipIf(!PYTHON)("the PyTorch worker's wait for its next request", () => {
  const run = () => {
    const r = spawnSync(PYTHON!, ['-c', PROBE, torchWorkerScript()], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    return JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, number | string>;
  };
  const o = PYTHON ? run() : {};
  const n = (k: string) => o[k] as number;

  it('polls until its deadline when nothing arrives, then leaves the wait to the blocking read', () => {
    expect(n('idle_wall')).toBeGreaterThanOrEqual(0.2);
    expect(n('idle_wall')).toBeLessThan(2);
    expect(n('idle_polls')).toBeGreaterThan(10); // polling, not one sleeping wait
    expect(n('past_deadline')).toBeLessThan(0.05);
  });

  it('returns as soon as a request (or end-of-file) arrives, and reads none of it', () => {
    expect(n('woken_after')).toBeGreaterThanOrEqual(0.04);
    expect(n('woken_after')).toBeLessThan(2);
    expect(o.left_for_reader).toBe('x');
    expect(n('eof_after')).toBeLessThan(2);
  });

  it('polls after a timed CUDA forward only: not after an untimed one, nor on the CPU', () => {
    expect(n('cuda_timed')).toBeGreaterThan(0.9 * n('spin_s'));
    expect(n('cuda_timed')).toBeLessThanOrEqual(n('spin_s') + 1);
    expect(n('cuda_untimed')).toBe(0);
    expect(n('cpu_timed')).toBe(0);
  });
});
