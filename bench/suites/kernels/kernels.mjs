#!/usr/bin/env node
// L1 kernel benchmark of backend-cuda (issue 4): every L1 task of the dense LLM family at Llama-3-8B shapes, its
// baseline module run on CUDA (whatever CudaOps implements; the rest is recorded 'not implemented'), timed with
// device events: warm-up, then >= 20 calls each after an L2 flush (a memset of 2x L2). Bytes and FLOPs come from
// task.work(case); the floor is max(bytes / copy bandwidth, flops / bf16 GEMM rate), both measured in this run
// (a 2 GiB D2D copy, read + written; an 8192^3 bf16 cuBLASLt GEMM). Memory-bound cases also get a copy of their own
// byte count, timed the same way (sameSizeCopyMs, fracSameSizeCopy): the reachable rate at that size.
// Bundled by tools/gpu-host-bundle.mjs into dist/gpu-host/bench/suites/kernels/kernels.mjs; on the GPU host:
//   dist/gpu-host/run-node bench/suites/kernels/kernels.mjs [--json out.json] [--quick] [--only substring] [--repeat N]
// --repeat N times every case N times in this process, each on fresh inputs allocated behind a spacer of i x 97 MiB
// held for that repetition (a row per repetition: `rep`, and `inputPtrs`, the inputs' device addresses). The addresses
// are virtual (the driver picks the physical pages), so this tells a per-process effect (every repetition alike) from
// one that follows the allocations (repetitions differ). Paged decode b64x2k varies up to 30% between processes (runs
// 14-15).
// bench/kernels_torch.py times the same math in PyTorch (eager, torch.compile); bench/suites/kernels/run.sh runs both.
import '../../lib/user-errors.mjs'; // first: a bad FASTKERNELS_* value is one line, not a stack
import { writeFileSync } from 'node:fs';
import { ModuleRegistry, Rng, Tensor, hostArgsFor, withContext } from '@fastkernels/core';
import { denseMoeLlmTasks, initNormal } from '@fastkernels/model-zoo';
import { cudaBackendOrExit, launchSettings } from '../../lib/common.mjs';
import { benchTimer, deviceRandom } from '../../lib/timing.mjs';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : undefined;
const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined;
const repeat = args.includes('--repeat') ? Number(args[args.indexOf('--repeat') + 1]) : 1;
if (!Number.isInteger(repeat) || repeat < 1 || repeat > 100) {
  console.error(`bench-kernels: --repeat takes a whole number from 1 to 100 (got '${args[args.indexOf('--repeat') + 1]}'), e.g. --repeat 5`);
  process.exit(2);
}
const SPACER_BYTES = 97 * 2 ** 20;
const ITERS = quick ? 20 : 30;
const WARMUP = 3;

const backend = cudaBackendOrExit('bench-kernels');
const rt = backend.runtime;
const t0 = performance.now();
const { timeMs, sameSizeCopyMs, flushBytes } = benchTimer(backend, { warmup: WARMUP, iters: ITERS });

const fillRandom = deviceRandom(backend);

// ---- ceilings measured in this run
const copyBytes = 2 * 2 ** 30;
let copyGBps;
{
  const a = backend.allocate(copyBytes, 0);
  const b = backend.allocate(copyBytes, 0);
  rt.memset(a.devicePtr, 1, copyBytes);
  const ms = timeMs(() => rt.copyDtoD(b.devicePtr, a.devicePtr, copyBytes), { warmup: 2, iters: 10, flushL2: false });
  copyGBps = (2 * copyBytes) / (ms / 1e3) / 1e9;
  a.release();
  b.release();
}
let gemmTflops;
{
  const n = 8192;
  const x = Tensor.empty(backend, [n, n], 'bf16');
  const w = Tensor.empty(backend, [n, n], 'bf16');
  const o = Tensor.empty(backend, [n, n], 'bf16');
  fillRandom(x, 1);
  fillRandom(w, 2);
  const ms = timeMs(() => backend.ops.gemmInto(o, x, w, { transB: true }), { warmup: 3, iters: 10, flushL2: false });
  gemmTflops = (2 * n ** 3) / (ms / 1e3) / 1e12;
  for (const t of [x, w, o]) t.dispose();
}
rt.allocator.emptyCache();

console.log(`ceilings: copy ${copyGBps.toFixed(0)} GB/s (2 GiB D2D, read + write), bf16 GEMM ${gemmTflops.toFixed(1)} TFLOP/s (8192^3)`);

// makeInputs / initParameters of the tasks draw every value on the host; above BIG elements the bench substitutes
// device-side random data (same shapes, dtypes and distribution family; integer inputs keep the task's logic).
const BIG = 1 << 22;
const origFromArray = Tensor.fromArray;
function lazyRng(seed) {
  const rng = new Rng(seed);
  const fillNormal = rng.fillNormal.bind(rng);
  rng.fillNormal = (n, scale = 1) => (n > BIG ? { length: n, fkLazy: true, scale } : fillNormal(n, scale));
  return rng;
}
Tensor.fromArray = function (b, data, shape, dtype, options) {
  if (data && data.fkLazy) {
    const t = Tensor.empty(b, shape, dtype, options);
    fillRandom(t, data.length);
    return t;
  }
  return origFromArray.call(this, b, data, shape, dtype, options);
};

// ---- cases: Llama-3-8B (hidden 4096, 32/8 heads x 128, MLP 14336, vocab 128256), bf16
const TOKENS = quick ? [1, 32, 4096] : [1, 32, 256, 4096, 16384];
const TORCH_COMPILE_TOKENS = new Set([32, 4096]);
const task = (id) => denseMoeLlmTasks.find((t) => t.id === id);
const mk = (t, name, dims, init, options = {}) => ({ ...t.cases.ci[0], name, dtype: 'bf16', dims, init, options });

function benchCases(t) {
  const id = t.id;
  const out = [];
  const add = (name, dims, init, options = {}, compile = false) => out.push({ c: mk(t, name, dims, init, options), compile });
  if (id === 'L1/rms_norm') {
    for (const T of TOKENS) add(`fused-T${T}`, { T, H: 4096 }, [4096, 1e-5], { residual: true }, TORCH_COMPILE_TOKENS.has(T));
    add('plain-T4096', { T: 4096, H: 4096 }, [4096, 1e-5], {}, true);
  } else if (id === 'L1/silu_and_mul') {
    for (const T of TOKENS) add(`T${T}`, { T, D: 14336, D2: 28672 }, [], {}, TORCH_COMPILE_TOKENS.has(T));
  } else if (id === 'L1/gelu_and_mul') {
    for (const T of [32, 4096]) add(`tanh-T${T}`, { T, D: 14336, D2: 28672 }, ['tanh'], {}, T === 4096);
  } else if (id === 'L1/rotary_emb') {
    for (const T of TOKENS) add(`neox-T${T}`, { T, NQ: 32, NK: 8, D: 128, R: 128, P: 8192, HQ: 4096, HK: 1024 }, [128, 128, 8192, 500000, true, 'bf16'], {}, TORCH_COMPILE_TOKENS.has(T));
  } else if (id === 'L1/embedding') {
    for (const T of TOKENS) add(`T${T}`, { T, V: 128256, H: 4096 }, [128256, 4096], {}, false);
  } else if (id === 'L1/linear') {
    for (const T of quick ? [1, 4096] : [1, 32, 4096]) add(`gate-up-T${T}`, { T, K: 4096, N: 28672 }, [4096, 28672, false], {}, false);
    add('qkv-T4096', { T: 4096, K: 4096, N: 6144 }, [4096, 6144, false]);
    add('lm-head-T32', { T: 32, K: 4096, N: 128256 }, [4096, 128256, false]);
  } else if (id === 'L1/softmax') {
    for (const B of [1, 32, 256]) add(`logits-B${B}`, { B, V: 128256 }, [-1], {}, B === 256);
    add('attn-scores-1024x4096', { B: 1024, V: 4096 }, [-1], {}, true);
  } else if (id === 'L1/store_kvcache') {
    for (const T of TOKENS) add(`T${T}`, { T, NKV: 8, D: 128, NB: Math.max(2048, Math.ceil(T / 16) + 64) }, [], {}, TORCH_COMPILE_TOKENS.has(T));
  } else if (id === 'L1/paged_decode_attention') {
    const c = t.cases.production.find((p) => p.name === 'llama3-8b-decode-b64-2k');
    out.push({ c, compile: false });
  } else if (id === 'L1/varlen_prefill_attention') {
    const c = t.cases.production.find((p) => p.name === 'llama3-8b-prefill-4096x1');
    out.push({ c, compile: false });
  } else if (id === 'L1/sampler') {
    const s = t.cases.production;
    for (const c of s) out.push({ c, compile: false });
  }
  return out;
}

function runCase(t, c) {
  const registry = new ModuleRegistry();
  registry.registerTask(t);
  const ctx = { backend, device: 0, dtype: c.dtype, registry };
  const module = registry.createIn(ctx, t.id, ...c.init);
  const rng = lazyRng(4242);
  if (t.initParameters) t.initParameters(module, c, rng);
  else initNormal(module, rng, 1);
  const inputs = withContext(ctx, () => t.makeInputs(c, ctx, rng));
  const disposeResult = (r) => {
    if (!r) return;
    if (Array.isArray(r)) r.forEach(disposeResult);
    else if (r instanceof Tensor && !inputs.includes(r)) r.dispose();
  };
  const host = hostArgsFor(t, inputs, c); // the task's host inputs (the sampler's hint), as the bench harness passes them
  const call = () => disposeResult(withContext(ctx, () => module.forward(...inputs, ...host)));
  try {
    call();
    rt.synchronize();
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    module.dispose();
    for (const x of inputs) x?.dispose();
    return { status: /not yet implemented/.test(msg) ? 'not implemented' : 'error', detail: msg.split('\n')[0] };
  }
  const ms = timeMs(call);
  const inputPtrs = repeat > 1 ? inputs.map((x) => (x instanceof Tensor && x.storage.devicePtr !== undefined ? `0x${(x.storage.devicePtr + x.offset * x.itemsize).toString(16)}` : null)) : undefined;
  module.dispose();
  for (const x of inputs) x?.dispose();
  rt.allocator.emptyCache();
  return { status: 'ok', ms, ...(inputPtrs ? { inputPtrs } : {}) };
}

const results = [];
for (const t of denseMoeLlmTasks.filter((x) => x.level === 1)) {
  for (const { c, compile } of benchCases(t)) {
    const label = `${t.id} ${c.name}`;
    if (only && !label.includes(only)) continue;
    const w = t.work(c);
    const floorMs = Math.max(w.bytes / (copyGBps * 1e9), w.flops / (gemmTflops * 1e12)) * 1e3;
    const bound = w.bytes / (copyGBps * 1e9) >= w.flops / (gemmTflops * 1e12) ? 'memory' : 'compute';
    for (let rep = 0; rep < repeat; rep++) {
      // later repetitions allocate their inputs behind a spacer held for the case's run
      const spacer = rep > 0 ? Tensor.empty(backend, [(rep * SPACER_BYTES) / 4], 'f32', { device: 0 }) : null;
      let r;
      try {
        r = runCase(t, c);
      } finally {
        if (spacer) {
          spacer.dispose();
          rt.allocator.emptyCache(); // the spacer's block back to the driver, not kept for the next repetition's inputs
        }
      }
      const row = { task: t.id, case: c.name, ...(repeat > 1 ? { rep } : {}), dtype: c.dtype, dims: c.dims, init: c.init, options: c.options, torchCompile: compile, bytes: w.bytes, flops: w.flops, floorMs, bound, ...r };
      if (r.status === 'ok') {
        row.fracFloor = floorMs / r.ms;
        row.gbps = w.bytes / (r.ms / 1e3) / 1e9;
        row.tflops = w.flops / (r.ms / 1e3) / 1e12;
        row.fracCopyBw = row.gbps / copyGBps;
        if (bound === 'memory') {
          row.sameSizeCopyMs = sameSizeCopyMs(w.bytes);
          row.fracSameSizeCopy = row.sameSizeCopyMs / r.ms;
        }
      }
      results.push(row);
      const same = row.fracSameSizeCopy !== undefined ? `  same-size copy ${(row.sameSizeCopyMs * 1e3).toFixed(1)} us = ${(row.fracSameSizeCopy * 100).toFixed(0)}%` : '';
      const shown = r.status === 'ok' ? `${(r.ms * 1e3).toFixed(1).padStart(9)} us  floor ${(floorMs * 1e3).toFixed(1).padStart(8)} us  ${(row.fracFloor * 100).toFixed(0).padStart(3)}% of floor  ${row.gbps.toFixed(0).padStart(5)} GB/s ${row.tflops.toFixed(1).padStart(6)} TF${same}` : `${r.status}${r.detail ? `: ${r.detail.slice(0, 90)}` : ''}`;
      console.log(`${(repeat > 1 ? `${label} #${rep}` : label).padEnd(52)} ${shown}`);
    }
  }
}
Tensor.fromArray = origFromArray;

const result = {
  tool: 'fastkernels',
  versions: backend.versions(),
  device: backend.devices()[0],
  ceilings: { copyGBps, gemmTflops, copyBytes, gemm: '8192^3 bf16', l2FlushBytes: flushBytes },
  iters: ITERS,
  repeat,
  settings: launchSettings(backend), // the tuning in force (its files; FASTKERNELS_TUNING overrides for A/B runs)
  seconds: (performance.now() - t0) / 1e3,
  results,
};
if (jsonOut) writeFileSync(jsonOut, JSON.stringify(result, null, 2));
else console.log(JSON.stringify(result));
console.log(`bench-kernels: ${results.length} cases in ${result.seconds.toFixed(1)} s`);
