// How the kernel-level suites time and feed a kernel (kernels, ops): device events around one call after an L2
// flush, medians; N(0, 1) data filled on the device; a same-size device copy timed alike (what a memory-bound kernel
// of that size can reach here: at 16 MB launch and ramp alone keep a copy well below the 2 GiB copy rate).
import { Rng, Tensor, prepareOp } from '@fastkernels/core';

export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * The timing tools of one CUDA backend. `timeMs(fn)` is the median ms of `iters` event-timed calls of fn, each after
 * a write of 2x L2 (outside the events) unless `flushL2` is false, after `warmup` untimed calls.
 */
export function benchTimer(backend, { warmup, iters }) {
  const rt = backend.runtime;
  const addon = rt.addon;
  const flushBytes = 2 * (rt.properties().l2CacheBytes || 64 * 2 ** 20);
  const flushBuf = backend.allocate(flushBytes, 0);
  const flush = () => rt.memset(flushBuf.devicePtr, 0, flushBytes / 4, 4);

  function timeMs(fn, { warmup: w = warmup, iters: n = iters, flushL2 = true } = {}) {
    const e0 = rt.acquireEvent();
    const e1 = rt.acquireEvent();
    for (let i = 0; i < w; i++) fn();
    rt.synchronize();
    const ts = [];
    for (let r = 0; r < n; r++) {
      if (flushL2) flush();
      addon.eventRecord(e0, rt.stream);
      fn();
      addon.eventRecord(e1, rt.stream);
      addon.eventSynchronize(e1);
      ts.push(addon.eventElapsed(e0, e1));
    }
    rt.releaseEvent(e0);
    rt.releaseEvent(e1);
    return median(ts);
  }

  // memoized per size: a D2D copy moving `bytes` (half read, half written), timed like the cases
  const copies = new Map();
  function sameSizeCopyMs(bytes) {
    const half = Math.max(256, Math.round(bytes / 2 / 256) * 256);
    if (!copies.has(half)) {
      const a = backend.allocate(half, 0);
      const b = backend.allocate(half, 0);
      rt.memset(a.devicePtr, 1, half);
      copies.set(half, timeMs(() => rt.copyDtoD(b.devicePtr, a.devicePtr, half)));
      a.release();
      b.release();
    }
    return copies.get(half);
  }

  return { timeMs, sameSizeCopyMs, flushBytes };
}

/**
 * fillRandom(t, seed): N(0, 1) values in t, copied (converting) from a 4M-value device pool at rotating offsets
 * (host draws of ~1e9 normals would take minutes). The pool is made at the first fill.
 */
export function deviceRandom(backend) {
  const POOL = 1 << 22;
  let pool;
  return function fillRandom(t, seed = 1) {
    pool ??= Tensor.fromArray(backend, new Rng(12345).fillNormal(POOL, 1), [POOL], 'f32');
    const flat = t.view([t.numel]);
    let off = 0;
    let rot = (seed * 7919) % POOL;
    while (off < t.numel) {
      const len = Math.min(t.numel - off, POOL - rot);
      const dst = flat.narrow(0, off, len);
      const src = pool.narrow(0, rot, len);
      backend.ops.copy(dst, src);
      dst.dispose();
      src.dispose();
      off += len;
      rot = (rot + 104729) % POOL;
    }
    flat.dispose();
    return t;
  };
}

/**
 * The same `timeMs(fn, { warmup, iters })` on the host clock, a device sync around each call: for a backend without
 * device events (the CPU backend of the suites' smoke runs; its figures only test the plumbing).
 */
export function hostClockTimer(backend, { warmup, iters }, device = 0) {
  function timeMs(fn, { warmup: w = warmup, iters: n = iters } = {}) {
    for (let i = 0; i < w; i++) fn();
    backend.synchronize(device);
    const ts = [];
    for (let r = 0; r < n; r++) {
      const t0 = performance.now();
      fn();
      backend.synchronize(device);
      ts.push(performance.now() - t0);
    }
    return median(ts);
  }
  return { timeMs };
}

/**
 * The dense bf16 matrix rate in TFLOP/s: an n^3 GEMM through the op registry's matmul (cuBLASLt on CUDA) timed by
 * `timeMs` (benchTimer's, or hostClockTimer's): the ceiling FLOP-bound work is held to (ops: the bmm / MoE floors;
 * vision: a model's fraction of it).
 */
export function matrixRateTflops(backend, timeMs, n = 8192) {
  const fillRandom = deviceRandom(backend);
  const [x, y] = [1, 2].map((seed) => fillRandom(Tensor.empty(backend, [n, n], 'bf16'), seed));
  const mm = prepareOp('matmul');
  const ms = timeMs(() => mm([x, y]).forEach((t) => t.dispose()));
  x.dispose();
  y.dispose();
  return (2 * n ** 3) / (ms / 1e3) / 1e12;
}
