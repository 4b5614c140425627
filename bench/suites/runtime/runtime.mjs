#!/usr/bin/env node
// Runtime micro-benchmarks of backend-cuda (issue 3), timed with device events after a warm-up:
//   launch overhead of an empty kernel (eager, and per kernel inside a replayed 1000-launch graph),
//   device-to-device copy bandwidth at 1-4 GiB, cuBLASLt bf16 GEMM TFLOP/s (8192^3, Llama-3-8B decode and prefill).
// Bundled by tools/gpu-host-bundle.mjs into dist/gpu-host/bench/suites/runtime/runtime.mjs; run there with
//   dist/gpu-host/run-node bench/suites/runtime/runtime.mjs [--json out.json] [--quick]
// bench/runtime_torch.py measures the same with PyTorch; bench/suites/runtime/run.sh runs both and merges them.
import '../../lib/user-errors.mjs'; // first: a bad FASTKERNELS_* value is one line, not a stack
import { writeFileSync } from 'node:fs';
import { Tensor } from '@fastkernels/core';
import { cudaKernel, KERNEL_SOURCES } from '@fastkernels/backend-cuda';
import { cudaBackendOrExit } from '../../lib/common.mjs';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : undefined;

const backend = cudaBackendOrExit('bench-runtime');
const rt = backend.runtime;
const addon = rt.addon;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Milliseconds of `fn` on the current stream, median of `reps` event-timed runs after `warmup`. */
function timeMs(fn, { warmup = 3, reps = 10 } = {}) {
  const e0 = rt.acquireEvent();
  const e1 = rt.acquireEvent();
  for (let i = 0; i < warmup; i++) fn();
  rt.synchronize();
  const ts = [];
  for (let r = 0; r < reps; r++) {
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

const result = { tool: 'fastkernels', versions: backend.versions(), device: backend.devices()[0], launch: {}, copy: [], gemm: [] };

// ---- launch overhead
const empty = cudaKernel({ source: KERNEL_SOURCES['runtime.cu'], entry: 'fk_empty' }).compile();
const N = quick ? 10_000 : 100_000;
for (let i = 0; i < 2000; i++) empty.launch(1, 1, 0, []);
rt.synchronize();
{
  const e0 = rt.acquireEvent();
  const e1 = rt.acquireEvent();
  const t0 = performance.now();
  addon.eventRecord(e0, rt.stream);
  for (let i = 0; i < N; i++) empty.launch(1, 1, 0, []);
  addon.eventRecord(e1, rt.stream);
  const hostMs = performance.now() - t0;
  addon.eventSynchronize(e1);
  const devMs = addon.eventElapsed(e0, e1);
  result.launch.eagerHostUsPerLaunch = (hostMs * 1000) / N;
  result.launch.eagerUsPerLaunch = (Math.max(devMs, hostMs) * 1000) / N;
  result.launch.launches = N;
}
{
  const per = 1000;
  const g = rt.capture(() => {
    for (let i = 0; i < per; i++) empty.launch(1, 1, 0, []);
  });
  const reps = quick ? 5 : 20;
  const ms = timeMs(() => g.replay(), { warmup: 3, reps });
  result.launch.graphUsPerKernel = (ms * 1000) / per;
  result.launch.graphKernels = per;
  g.destroy();
}
console.log(`launch: eager ${result.launch.eagerUsPerLaunch.toFixed(2)} us/launch (host submit ${result.launch.eagerHostUsPerLaunch.toFixed(2)}), graph ${result.launch.graphUsPerKernel.toFixed(3)} us/kernel`);

// ---- D2D copy bandwidth (bytes read + written)
for (const gib of quick ? [1] : [1, 2, 4]) {
  const bytes = gib * 2 ** 30;
  const src = backend.allocate(bytes, 0);
  const dst = backend.allocate(bytes, 0);
  rt.memset(src.devicePtr, 1, bytes);
  const ms = timeMs(() => rt.copyDtoD(dst.devicePtr, src.devicePtr, bytes), { warmup: 2, reps: quick ? 3 : 10 });
  const gbps = (2 * bytes) / (ms / 1e3) / 1e9;
  result.copy.push({ gib, ms, gbps });
  console.log(`copy ${gib} GiB: ${ms.toFixed(3)} ms, ${gbps.toFixed(0)} GB/s (read+write)`);
  src.release();
  dst.release();
  rt.allocator.emptyCache();
}

// ---- cuBLASLt bf16 GEMM: out[M,N] = x[M,K] @ w[N,K]^T (the Linear layout)
const llama = [
  ['qkv', 6144, 4096],
  ['o', 4096, 4096],
  ['gate_up', 28672, 4096],
  ['down', 4096, 14336],
  ['lm_head', 128256, 4096],
];
const shapes = [{ name: 'square', m: 8192, n: 8192, k: 8192 }];
for (const m of quick ? [1, 32] : [1, 8, 16, 32]) for (const [name, n, k] of llama) shapes.push({ name: `decode.${name}`, m, n, k });
for (const [name, n, k] of llama) shapes.push({ name: `prefill.${name}`, m: 4096, n, k });
for (const s of shapes) {
  const x = Tensor.empty(backend, [s.m, s.k], 'bf16');
  const w = Tensor.empty(backend, [s.n, s.k], 'bf16');
  const out = Tensor.empty(backend, [s.m, s.n], 'bf16');
  x.fill_(0.01);
  w.fill_(0.02);
  const flops = 2 * s.m * s.n * s.k;
  const reps = flops > 1e12 ? 10 : 30;
  const ms = timeMs(() => backend.ops.gemmInto(out, x, w, { transB: true }), { warmup: 5, reps: quick ? 5 : reps });
  const tflops = flops / (ms / 1e3) / 1e12;
  result.gemm.push({ ...s, ms, tflops });
  console.log(`gemm ${s.name} M=${s.m} N=${s.n} K=${s.k}: ${(ms * 1e3).toFixed(1)} us, ${tflops.toFixed(1)} TFLOP/s`);
  x.dispose();
  w.dispose();
  out.dispose();
}
rt.allocator.emptyCache();

if (jsonOut) writeFileSync(jsonOut, JSON.stringify(result, null, 2));
else console.log(JSON.stringify(result));
