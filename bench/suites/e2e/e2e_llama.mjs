#!/usr/bin/env node
// Issue 6 end-to-end benchmark, our side: a Llama-family model (Llama-3-8B shape in suites/e2e/run.sh) on the CUDA
// backend with random bf16 weights filled on the device (initLlamaWeightsOnDevice: seconds, not the minutes host
// init of 8e9 values takes), run through the engine's generate() (eager: no CUDA graphs yet):
//   prefill  1 x --prefill-len tokens, max_tokens 1: prompt tokens / the first step's time (prefill + first sample)
//   decode   B prompts of --decode-prompt tokens, --decode-steps tokens after the first: B * steps / decode time
// Each measurement runs once untimed first (NVRTC compiles, allocator warm-up) and then --repeats times (median).
// Weight init is excluded. Results go to --json after every measurement (a timeout still leaves what was done).
// Bundled by tools/gpu-host-bundle.mjs into dist/gpu-host/bench-e2e-llama.mjs:
//   dist/gpu-host/run-node bench-e2e-llama.mjs --model DIR_WITH_CONFIG_JSON --json out.json [--batches 1,32]
import '../../lib/user-errors.mjs'; // first: a bad FASTKERNELS_* value is one line, not a stack
import { writeFileSync } from 'node:fs';
import { baselineRegistry, generate, loadModel } from '@fastkernels/model-zoo';
import { benchArgs, cudaBackendOrExit } from '../../lib/common.mjs';

const { opt } = benchArgs();
const modelDir = opt('--model');
const jsonOut = opt('--json');
const prefillLen = Number(opt('--prefill-len', 4096));
const decodePrompt = Number(opt('--decode-prompt', 128));
const decodeSteps = Number(opt('--decode-steps', 64));
const batches = String(opt('--batches', '1,32')).split(',').filter(Boolean).map(Number);
const repeats = Number(opt('--repeats', 2));
const seed = Number(opt('--seed', 0));
if (!modelDir) {
  console.error('e2e-llama: --model DIR (a folder with config.json) is required');
  process.exit(1);
}
const log = (m) => console.error(`e2e-llama: ${m}`);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const backend = cudaBackendOrExit('e2e-llama');
const rt = backend.runtime;
const result = { side: 'ours', model: modelDir, device: null, versions: backend.versions(), settings: { prefillLen, decodePrompt, decodeSteps, batches, repeats, seed }, runs: {}, errors: [] };
try {
  result.device = rt.properties().name ?? null;
} catch {
  /* optional */
}
const save = () => jsonOut && writeFileSync(jsonOut, JSON.stringify(result, null, 2));

const t0 = performance.now();
const loaded = loadModel(modelDir, { backend, registry: baselineRegistry(), randomInit: 'device', initSeed: seed });
const { model, geometry, ctx } = loaded;
result.config = { modelType: loaded.modelType, hiddenSize: geometry.hiddenSize, layers: geometry.numHiddenLayers, heads: geometry.numAttentionHeads, kvHeads: geometry.numKeyValueHeads, intermediate: geometry.intermediateSize, vocab: geometry.vocabSize, dtype: ctx.dtype };
result.loadMs = performance.now() - t0;
result.weightsMs = loaded.weightsMs;
log(`model built and weights filled on the device in ${(result.loadMs / 1e3).toFixed(1)} s (weights ${(loaded.weightsMs / 1e3).toFixed(1)} s)`);
save();

// seeded prompt ids in [3, vocab)
let s = (seed * 2654435761 + 12345) >>> 0;
const nextId = () => {
  s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
  return 3 + (s % (geometry.vocabSize - 3));
};
const ids = (n) => Array.from({ length: n }, nextId);

function measure(name, requests, maxTokens, pick) {
  const samples = [];
  for (let r = 0; r <= repeats; r++) {
    const res = generate(model, ctx, geometry, requests, { maxTokens, temperature: 0 });
    if (r === 0) {
      log(`${name}: warm-up ${res.prefillMs.toFixed(1)} ms prefill, ${res.decodeMs.toFixed(1)} ms decode`);
      continue;
    }
    samples.push(pick(res));
  }
  return samples;
}

try {
  const P = prefillLen;
  const ms = measure(`prefill 1x${P}`, [{ promptIds: ids(P) }], 1, (r) => r.prefillMs);
  const m = median(ms);
  result.runs.prefill = { batch: 1, promptLen: P, ms: m, samplesMs: ms, tokensPerS: (P / m) * 1e3 };
  log(`prefill 1x${P}: ${m.toFixed(1)} ms, ${result.runs.prefill.tokensPerS.toFixed(0)} tok/s`);
} catch (e) {
  result.errors.push({ run: 'prefill', error: String(e?.stack ?? e).slice(0, 2000) });
  log(`prefill FAILED: ${e?.message ?? e}`);
}
save();

for (const B of batches) {
  try {
    const reqs = Array.from({ length: B }, () => ({ promptIds: ids(decodePrompt) }));
    const samples = measure(`decode bs${B}`, reqs, decodeSteps + 1, (r) => ({ decodeMs: r.decodeMs, prefillMs: r.prefillMs, steps: r.steps - 1 }));
    const m = median(samples.map((x) => x.decodeMs));
    const steps = samples[0].steps;
    result.runs[`decode_bs${B}`] = {
      batch: B, promptLen: decodePrompt, steps, ms: m, samplesMs: samples.map((x) => x.decodeMs), msPerStep: m / steps,
      tokensPerS: ((B * steps) / m) * 1e3, firstStepMs: median(samples.map((x) => x.prefillMs)),
    };
    log(`decode bs${B}: ${steps} steps in ${m.toFixed(1)} ms: ${(m / steps).toFixed(2)} ms/step, ${result.runs[`decode_bs${B}`].tokensPerS.toFixed(1)} tok/s`);
  } catch (e) {
    result.errors.push({ run: `decode_bs${B}`, error: String(e?.stack ?? e).slice(0, 2000) });
    log(`decode bs${B} FAILED: ${e?.message ?? e}`);
  }
  save();
}

try {
  const st = rt.allocator.stats();
  result.allocator = { peakGiB: st.peak / 2 ** 30, reservedGiB: st.reserved / 2 ** 30 };
} catch {
  /* optional */
}
result.seconds = (performance.now() - t0) / 1e3;
model.dispose();
save();
log(`done in ${result.seconds.toFixed(1)} s${jsonOut ? `: ${jsonOut}` : ''}`);
