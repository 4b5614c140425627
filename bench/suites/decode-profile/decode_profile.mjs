#!/usr/bin/env node
// Issue 7, bs-1 decode: where a step's time goes. Serves ONE request through LLMEngine (the production path: paged KV,
// CUDA-graph decode) on a Llama-family model with random bf16 weights filled on the device, with as few kernel launches
// before the measured steps as the engine allows, so that ncu's per-launch list ends with the decode graph replays:
//   engine start   one activation-profiling forward (--prompt tokens), one eager warm-up decode at bs 1, the capture
//                  of the bs-1 graph only (maxGraphBatch 1, maxNumSeqs 1; a capture launches nothing)
//   the request    --prompt tokens (one prefill step, eager), then --steps decode steps (graph replays)
// Prints on stderr `decode-profile: MARKER steps=N meanStepMs=X ...` (summarizeSteps over the engine's decode step
// records, the figure bench/serve_llama.mjs reports) and writes --json. Without ncu, --graph-timing R then replays the
// captured bs-1 graph R more times between device events (the graph's device time alone) and --copy-bw measures the
// device-to-device copy bandwidth (as bench/runtime.mjs does); under ncu leave both off (the replays would add
// launches; ncu does not profile copies). bench/suites/decode-profile/run.sh runs it twice (without and under ncu).
// Bundled by tools/gpu-host-bundle.mjs into dist/gpu-host/bench/suites/decode-profile/decode_profile.mjs:
//   dist/gpu-host/run-node bench/suites/decode-profile/decode_profile.mjs --model DIR_WITH_CONFIG_JSON [--steps 8] [--prompt 64]
//       [--max-model-len N] [--json out.json] [--graph-timing 50] [--copy-bw]
// --max-model-len: the context the graph is captured for (default prompt + steps + 64; bench/serve_llama.mjs's engine
// has 2176, so its bs-1 decode-attention runs 17 splits a layer where this default gives 2).
// --ablate OP[,OP] (or FASTKERNELS_BENCH_ABLATE): those ops launch nothing (bench/decode-ablate.mjs): a timing bound only;
// an ablated op the model never calls is an error in the JSON (nothing was taken out).
import '../../lib/user-errors.mjs'; // first: a bad FASTKERNELS_* value is one line, not a stack
import { readFileSync, writeFileSync } from 'node:fs';
import { LLMEngine, baselineRegistry, loadModel, summarizeSteps } from '@fastkernels/model-zoo';
import { benchArgs, cudaBackendOrExit, launchSettings } from '../../lib/common.mjs';
import { ablateOps, parseAblate } from './decode-ablate.mjs';
import { DEFAULT_COPY_GBS, llamaGemmWeights } from './decode-profile-lib.mjs';

const { opt, has } = benchArgs();
const modelDir = opt('--model');
const jsonOut = opt('--json');
const steps = Number(opt('--steps', process.env.N_PROFILE ?? 8));
const promptLen = Number(opt('--prompt', 64));
const graphTiming = Number(opt('--graph-timing', 0));
const maxModelLenOpt = opt('--max-model-len');
const log = (m) => console.error(`decode-profile: ${m}`);
const ablate = parseAblate(opt('--ablate', process.env.FASTKERNELS_BENCH_ABLATE)); // a bad name: user-errors.mjs, exit 2
if (!modelDir || !(steps >= 1) || !(promptLen >= 1) || (maxModelLenOpt !== undefined && !(Number(maxModelLenOpt) >= promptLen + steps + 1))) {
  console.error('decode-profile: --model DIR (a folder with config.json) is required; --steps and --prompt must be >= 1; --max-model-len must hold the prompt and the steps (>= prompt + steps + 1)');
  process.exit(1);
}
const backend = cudaBackendOrExit('decode-profile');
const rt = backend.runtime;
const cfgJson = JSON.parse(readFileSync(`${modelDir}/config.json`, 'utf8'));
const result = {
  side: 'ours', model: modelDir, device: rt.properties().name ?? null, versions: backend.versions(),
  settings: { steps, promptLen, maxModelLen: maxModelLenOpt === undefined ? null : Number(maxModelLenOpt), graphTiming, copyBw: has('--copy-bw'), ablate, ...launchSettings(backend) }, weights: llamaGemmWeights(cfgJson), errors: [],
};
const save = () => jsonOut && writeFileSync(jsonOut, JSON.stringify(result, null, 2));

try {
  const t0 = performance.now();
  const { model, geometry, ctx } = loadModel(modelDir, { backend, registry: baselineRegistry(), randomInit: 'device', initSeed: 0 });
  result.loadSeconds = (performance.now() - t0) / 1e3;
  log(`model built and weights filled on the device in ${result.loadSeconds.toFixed(1)} s`);
  let ablatedCalls;
  if (ablate.length) {
    ablatedCalls = ablateOps(backend, ablate);
    log(`ABLATED (no kernel launched, outputs garbage: the step time is a bound, not a result): ${ablate.join(', ')}`);
  }
  const maxModelLen = Math.min(maxModelLenOpt === undefined ? promptLen + steps + 64 : Number(maxModelLenOpt), geometry.maxPositionEmbeddings);
  const t1 = performance.now();
  // bs 1 only: one sequence, one graph bucket (graphBucketSizes(1) = [1]); the activation profile runs one
  // promptLen-token forward; the KV cache is capped at one sequence of maxModelLen
  const engine = new LLMEngine(model, ctx, geometry, {
    maxNumSeqs: 1, maxGraphBatch: 1, maxNumBatchedTokens: promptLen, maxModelLen, graphs: true, log,
  });
  result.engineStartSeconds = (performance.now() - t1) / 1e3;
  result.graphBuckets = [...engine.runner.graphBuckets];
  if (result.graphBuckets.join(',') !== '1') throw new Error(`expected one graph bucket [1], got [${result.graphBuckets.join(', ')}]`);

  const V = geometry.vocabSize;
  const promptIds = Array.from({ length: promptLen }, (_, i) => 3 + ((2 * 7919 + i * 104729) % (V - 3)));
  engine.records.length = 0;
  // the prefill samples the first token; `steps` decode steps then sample the rest
  engine.generate([{ promptIds, params: { maxTokens: steps + 1, ignoreEos: true } }]);
  const s = summarizeSteps(engine.records);
  Object.assign(result, { stepMs: s.meanStepMs, meanHostMs: s.meanHostMs, hostFraction: s.hostFraction, decodeSteps: s.steps, graphSteps: engine.records.filter((r) => r.kind === 'decode' && r.graph).length, stepRecords: engine.records });
  if (s.steps !== steps || result.graphSteps !== steps) result.errors.push(`expected ${steps} graph decode steps, got ${s.steps} decode steps (${result.graphSteps} graph replays)`);
  if (ablatedCalls) {
    result.ablatedCalls = ablatedCalls;
    for (const [op, n] of Object.entries(ablatedCalls)) if (n === 0) result.errors.push(`--ablate ${op}: the model never called it, so nothing was taken out`);
  }
  // the marker: what the ncu run's last launches are, and the step time the engine measured
  console.error(`decode-profile: MARKER steps=${s.steps} graphSteps=${result.graphSteps} meanStepMs=${s.meanStepMs.toFixed(4)} meanHostMs=${s.meanHostMs.toFixed(4)} decodeTokS=${(1000 / s.meanStepMs).toFixed(1)}`);
  save();

  if (graphTiming > 0) {
    // the captured bs-1 graph alone, back to back between two events (its inputs are the last step's: the finished
    // sequence's staging, so it writes one KV slot of a freed block; nothing reads it again)
    // bucket -> sampler-path variants: the one the request's greedy steps replayed (Ops.samplePath with no drawing row)
    const variants = engine.runner.graphs?.get?.(1);
    const greedyPath = backend.ops.samplePath?.(1, geometry.vocabSize, { sampledRows: 0 }) ?? '';
    const g = variants instanceof Map ? (variants.get(greedyPath) ?? variants.values().next().value) : variants;
    if (!g) result.errors.push('graph timing: no captured bs-1 graph found (engine.runner.graphs)');
    else {
      const addon = rt.addon;
      const stream = g.stream ?? rt.stream;
      for (let i = 0; i < 3; i++) g.replay();
      rt.synchronize();
      const e0 = rt.acquireEvent();
      const e1 = rt.acquireEvent();
      addon.eventRecord(e0, stream);
      for (let i = 0; i < graphTiming; i++) g.replay();
      addon.eventRecord(e1, stream);
      addon.eventSynchronize(e1);
      result.graphReplayMs = addon.eventElapsed(e0, e1) / graphTiming;
      result.graphReplays = graphTiming;
      rt.releaseEvent(e0);
      rt.releaseEvent(e1);
      log(`graph replay alone: ${result.graphReplayMs.toFixed(4)} ms (${graphTiming} back-to-back replays, device events)`);
    }
  }
  if (has('--copy-bw')) {
    // device-to-device copy of 1 GiB (read + write), median of 5 after 2 warm-ups (bench/runtime.mjs's figure)
    const bytes = 2 ** 30;
    const src = backend.allocate(bytes, 0);
    const dst = backend.allocate(bytes, 0);
    try {
      rt.memset(src.devicePtr, 1, bytes);
      const addon = rt.addon;
      const e0 = rt.acquireEvent();
      const e1 = rt.acquireEvent();
      const ts = [];
      for (let r = 0; r < 7; r++) {
        addon.eventRecord(e0, rt.stream);
        rt.copyDtoD(dst.devicePtr, src.devicePtr, bytes);
        addon.eventRecord(e1, rt.stream);
        addon.eventSynchronize(e1);
        if (r >= 2) ts.push(addon.eventElapsed(e0, e1));
      }
      rt.releaseEvent(e0);
      rt.releaseEvent(e1);
      const ms = [...ts].sort((a, b) => a - b)[Math.floor(ts.length / 2)];
      result.copyGBs = (2 * bytes) / (ms / 1e3) / 1e9;
      log(`copy 1 GiB: ${ms.toFixed(3)} ms, ${result.copyGBs.toFixed(0)} GB/s (read+write; the profile compares with ${DEFAULT_COPY_GBS} unless this is used)`);
    } finally {
      src.release();
      dst.release();
    }
  }
} catch (e) {
  result.errors.push(String(e?.stack ?? e));
  log(`failed: ${e?.stack ?? e}`);
}
save();
// exit without disposing: nothing more reaches the device, so the profile's last launches are the decode steps
process.exit(result.stepMs !== undefined && !result.errors.length ? 0 : 1);
