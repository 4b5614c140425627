#!/usr/bin/env node
// Vision speed, our side (issues 33, 34): one model of the plan (vision_bench.py configs' WORK/plan.json) at each of its
// rows, timed like the PyTorch side (device events around one call after an L2 flush, medians; the host clock on the
// CPU backend), written to WORK/<model>/ours.json after every row:
//   yolov10n, yolov10s, convnextv2_base   the vision runner as detect / classify run it (fused at load, static input
//                       buffers, channels-last, one CUDA graph per batch size) on the init-weights checkpoint
//                       (WORK/<model>/ckpt): its device forward (forwardInPlace, the graph replay: no upload, no
//                       read-back) timed; run() with both, on the host clock, beside it as endToEndMs
//   flux_transformer    FluxTransformer2DModel, one denoising step (eager module call, as the pipeline runs it)
//   flux_vae            AutoencoderKL.decode of a 1024^2 image's latents (eager)
// FLUX's weights are filled on the device (initWeightsOnDevice: FLUX.1-dev's 12B in seconds; speed does not depend on
// the values). --matrix-rate instead: the dense bf16 rate of our matmul (8192^3) into WORK/rate-ours.json.
// Bundled by tools/gpu-host-bundle.mjs; on the GPU host:
//   dist/gpu-host/run-node bench/suites/vision/vision.mjs --work DIR (--model NAME | --matrix-rate) [--backend cuda|cpu]
import '../../lib/user-errors.mjs'; // first: a bad FASTKERNELS_* value is one line, not a stack
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor, withContext } from '@fastkernels/core';
import {
  AutoencoderKL, FluxTransformer2DModel, VisionRunner, baselineRegistry, fluxTransformerWeightRules, initWeightsOnDevice, loadVisionModel,
  parseFluxConfig, parseVaeConfig, vaeWeightRules,
} from '@fastkernels/model-zoo';
import { benchArgs, cudaBackendOrExit, launchSettings } from '../../lib/common.mjs';
import { benchTimer, deviceRandom, hostClockTimer, matrixRateTflops, median } from '../../lib/timing.mjs';
import { itersFor } from './vision-lib.mjs';

const { opt, has } = benchArgs();
const work = opt('--work');
const model = opt('--model');
const backendName = opt('--backend', 'cuda');
if (!work || (!model && !has('--matrix-rate')) || !['cuda', 'cpu'].includes(backendName)) {
  console.error('vision.mjs: --work DIR (--model NAME | --matrix-rate) [--backend cuda|cpu]');
  process.exit(1);
}
const log = (m) => console.error(`vision ours: ${m}`);
const backend = backendName === 'cuda' ? cudaBackendOrExit('vision') : new CpuBackend();
const plan = JSON.parse(readFileSync(join(work, 'plan.json'), 'utf8'));
const timer = backendName === 'cuda' ? benchTimer(backend, { warmup: 1, iters: 1 }) : hostClockTimer(backend, { warmup: 1, iters: 1 });
/** { ms, iters }: one call timed first, then as many as fill the plan's budget (itersFor, the rule torch's side uses). */
function timeMs(fn, budgetS = plan.timeBudgetS) {
  const iters = itersFor(plan, timer.timeMs(fn, { warmup: 1, iters: 1 }), budgetS);
  return { ms: timer.timeMs(fn, { warmup: Math.min(3, iters), iters }), iters };
}
const deviceName = () => (backendName === 'cuda' ? backend.runtime.properties().name ?? null : 'cpu');

if (has('--matrix-rate')) {
  const n = backendName === 'cuda' ? 8192 : 256;
  const tflops = matrixRateTflops(backend, (fn) => timeMs(fn, 1).ms, n);
  writeFileSync(join(work, 'rate-ours.json'), JSON.stringify({ n, tflops, backend: backendName, device: deviceName() }, null, 1));
  log(`our matmul, dense bf16 ${n}^3: ${tflops.toFixed(0)} TFLOP/s`);
  process.exit(0);
}

// cuDNN's conv algorithm choice: the plan's policy, the one torch's side runs (torch.backends.cudnn.benchmark)
const convAlgoSearch = plan.convAlgoSearch ?? 'benchmark';
if (backendName === 'cuda') backend.generatedOps.conv.algoSearch = convAlgoSearch;
const rows = plan.rows.filter((r) => r.model === model);
if (!rows.length) {
  console.error(`vision.mjs: ${model} has no rows in ${join(work, 'plan.json')} (models: ${plan.models.join(', ')})`);
  process.exit(1);
}
const dir = join(work, model);
const registry = baselineRegistry();
const result = {
  side: 'ours', model, backend: backendName, device: deviceName(), versions: backendName === 'cuda' ? backend.versions() : null,
  launch: launchSettings(backend), convAlgoSearch: backendName === 'cuda' ? convAlgoSearch : null, rows: {}, errors: [],
};
const save = () => writeFileSync(join(dir, 'ours.json'), JSON.stringify(result, null, 1));
save();

/** Each row: its timing, or the error recorded (the other rows still run). */
function eachRow(time) {
  for (const r of rows) {
    try {
      result.rows[r.id] = time(r);
      log(`${r.id}: ${result.rows[r.id].ms.toFixed(3)} ms (${result.rows[r.id].iters} calls)`);
    } catch (e) {
      result.errors.push({ row: r.id, error: String(e?.stack ?? e).split('\n').slice(0, 8).join(' | ') });
      log(`${r.id} FAILED: ${e?.message ?? e}`);
    }
    save();
  }
}

function visionRows() {
  const t0 = performance.now();
  const loaded = loadVisionModel(join(dir, 'ckpt'), { backend, registry, dtype: rows[0].dtype });
  const runner = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: Math.max(...rows.map((r) => r.batch)) });
  result.loadS = (performance.now() - t0) / 1e3;
  result.runner = { graphs: runner.usesGraphs, channelsLast: runner.channelsLast, dtype: loaded.ctx.dtype, imageSize: runner.imageSize };
  log(`${loaded.architecture.name} loaded and fused in ${result.loadS.toFixed(1)} s (graphs ${runner.usesGraphs}, channels-last ${runner.channelsLast}, ${loaded.ctx.dtype})`);
  const S = runner.imageSize;
  // pixels / 255 for the detector, the normalised range for the classifier (speed does not depend on them)
  const image = model.startsWith('yolov10') ? new Rng(1).fillUniform(3 * S * S, 0, 1) : new Rng(1).fillUniform(3 * S * S, -2, 2);
  const pixels = Float32Array.from(image);
  try {
    eachRow((r) => {
      const images = Array.from({ length: r.batch }, () => pixels);
      const c0 = performance.now();
      runner.run(images); // the graph captured (kernels compiled, warm-up forward), then the first replay
      backend.synchronize(0);
      const firstCallS = (performance.now() - c0) / 1e3;
      const { ms, iters } = timeMs(() => runner.forwardInPlace(r.batch));
      const e2e = [];
      for (let i = 0; i < 3; i++) {
        const s0 = performance.now();
        runner.run(images);
        e2e.push(performance.now() - s0);
      }
      return { ms, iters, firstCallS, endToEndMs: median(e2e), mode: runner.usesGraphs ? 'cuda-graph' : 'eager' };
    });
  } finally {
    runner.dispose();
    loaded.model.dispose();
  }
}

function fluxRows() {
  const spec = plan.inputs[model];
  const raw = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  const ctx = { backend, device: 0, dtype: rows[0].dtype, registry };
  withContext(ctx, () => {
    const isTransformer = model === 'flux_transformer';
    const cfg = isTransformer ? parseFluxConfig(raw, join(dir, 'config.json')) : parseVaeConfig(raw, join(dir, 'config.json'));
    const module = isTransformer ? new FluxTransformer2DModel(cfg) : new AutoencoderKL(cfg);
    try {
      const w0 = performance.now();
      initWeightsOnDevice(module, isTransformer ? fluxTransformerWeightRules(cfg) : vaeWeightRules(cfg), isTransformer ? 1 : 2);
      backend.synchronize(0);
      result.weightsS = (performance.now() - w0) / 1e3;
      log(`${model}: weights filled on the device in ${result.weightsS.toFixed(1)} s`);
      const fill = deviceRandom(backend);
      const randn = (shape, seed) => fill(Tensor.empty(backend, shape, ctx.dtype), seed);
      eachRow((r) => {
        const B = r.batch;
        const owned = [];
        const keep = (t) => (owned.push(t), t);
        let call;
        if (isTransformer) {
          const n = spec.imageTokens;
          const side = Math.round(Math.sqrt(n));
          const imgIds = new Float32Array(n * 3);
          for (let i = 0; i < n; i++) imgIds.set([0, Math.floor(i / side), i % side], i * 3);
          // as FluxPipeline feeds them: ids and timestep in the model dtype, guidance in f32
          const x = [
            keep(randn([B, n, spec.inChannels], 1)), keep(randn([B, spec.textTokens, spec.jointDim], 2)), keep(randn([B, spec.pooledDim], 3)),
            keep(Tensor.fromArray(backend, new Float32Array(B).fill(0.75), [B], ctx.dtype)),
            keep(Tensor.fromArray(backend, imgIds, [n, 3], ctx.dtype)), keep(Tensor.fromArray(backend, new Float32Array(spec.textTokens * 3), [spec.textTokens, 3], ctx.dtype)),
            keep(Tensor.fromArray(backend, new Float32Array(B).fill(3.5), [B], 'f32')),
          ];
          call = () => module.forward(...x).dispose();
        } else {
          const z = keep(randn([B, ...spec.latent], 4));
          call = () => module.decode(z).dispose();
        }
        try {
          const c0 = performance.now();
          call();
          backend.synchronize(0);
          const firstCallS = (performance.now() - c0) / 1e3;
          return { ...timeMs(call), firstCallS, mode: 'eager' };
        } finally {
          for (const t of owned) t.dispose();
        }
      });
    } finally {
      module.dispose();
    }
  });
}

try {
  if (model.startsWith('flux_')) fluxRows();
  else visionRows();
} catch (e) {
  result.errors.push({ error: String(e?.stack ?? e).split('\n').slice(0, 8).join(' | ') });
  log(`FAILED: ${e?.message ?? e}`);
}
save();
