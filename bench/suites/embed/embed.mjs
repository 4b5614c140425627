#!/usr/bin/env node
// Issue 35's embedding speed, our side: a BGE-M3-shape model (the config run.sh writes; random bf16 weights filled on
// the device) on the CUDA backend through the encoder runner's packed varlen path (requests packed in arrival order
// under --max-num-batched-tokens, cu_seqlens, flash_attn_varlen, the dense head), embedding the seeded workload of
// embed-lib.mjs (written to --workload first, so HF embeds the same token ids). A warm-up on the first --warmup
// documents (NVRTC compiles, allocator), then --repeats timed passes over all of them (the median; the clock stops
// after the vectors are on the host). Weight init is excluded. Writes --json after every step.
//   dist/gpu-host/run-node bench/suites/embed/embed.mjs --model DIR --json ours.json --workload docs.jsonl [--quick]
import '../../lib/user-errors.mjs'; // first: a bad FASTKERNELS_* value is one line, not a stack
import { writeFileSync } from 'node:fs';
import { EncoderRunner, baselineRegistry, loadEncoderModel, loadModelFolderConfig } from '@fastkernels/model-zoo';
import { cudaBackendOrExit, launchSettings } from '../../lib/common.mjs';
import { EmbedArgError, makeWorkload, parseEmbedArgs, workloadJsonl } from './embed-lib.mjs';

let a;
try {
  a = parseEmbedArgs(process.argv.slice(2));
} catch (e) {
  if (!(e instanceof EmbedArgError)) throw e;
  console.error(`embed: ${e.message}`);
  process.exit(2);
}
const log = (m) => console.error(`embed: ${m}`);
const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];

// the folder's config (no weights yet): the workload's ids stay within its vocabulary, its lengths within its positions
const geometry = loadModelFolderConfig(a.model).geometry;
if (a.maxLen > geometry.maxPositionEmbeddings) {
  console.error(`embed: --max-len ${a.maxLen} is above the ${geometry.maxPositionEmbeddings} tokens ${a.model} takes`);
  process.exit(2);
}
const docs = makeWorkload(a, geometry.vocabSize);
const tokens = docs.reduce((s, d) => s + d.length, 0);
if (a.workload) writeFileSync(a.workload, workloadJsonl(docs));
const result = {
  side: 'ours', device: null, versions: null, settings: { ...a }, launch: null,
  workload: { n: a.n, minLen: a.minLen, maxLen: a.maxLen, seed: a.seed, tokens, meanLen: tokens / a.n },
  runs: {}, summary: {}, errors: [],
};
const save = () => a.json && writeFileSync(a.json, JSON.stringify(result, null, 2));
save();

const backend = cudaBackendOrExit('embed');
result.versions = backend.versions();
result.launch = launchSettings(backend);
try {
  result.device = backend.runtime.properties().name ?? null;
} catch {
  /* optional */
}
const t0 = performance.now();
const loaded = loadEncoderModel(a.model, { backend, registry: baselineRegistry(), dtype: 'bf16', randomInit: 'device', initSeed: a.seed });
result.config = { architecture: loaded.architecture.name, ...loaded.geometry, dtype: loaded.ctx.dtype };
result.loadMs = performance.now() - t0;
log(`${loaded.architecture.name} built, weights filled on the device in ${(loaded.weightsMs / 1e3).toFixed(1)} s`);
save();

try {
  const runner = () =>
    new EncoderRunner(loaded.model, loaded.ctx, {
      padTokenId: loaded.config.padTokenId,
      maxLength: loaded.geometry.maxPositionEmbeddings,
      maxNumBatchedTokens: a.maxNumBatchedTokens,
      skipTokenIds: [0, 1, 2],
    });
  if (a.warmup > 0) {
    const w0 = performance.now();
    runner().embed(docs.slice(0, a.warmup), [a.pooling]);
    log(`warm-up on ${Math.min(a.warmup, a.n)} documents: ${((performance.now() - w0) / 1e3).toFixed(1)} s`);
  }
  const samples = [];
  let stats = null;
  let check = null;
  for (let r = 0; r < a.repeats; r++) {
    const run = runner();
    const s0 = performance.now();
    const out = run.embed(docs, [a.pooling]);
    samples.push(performance.now() - s0);
    stats = run.stats;
    // a sanity figure, not a parity check: dense / cls / mean vectors are unit rows
    const v = out[0]?.embedding;
    check = v ? { firstNorm: Math.hypot(...v), finite: out.every((o) => !o.embedding || o.embedding.every(Number.isFinite)) } : null;
    log(`pass ${r + 1}/${a.repeats}: ${(samples[r] / 1e3).toFixed(2)} s, ${stats.batches} forwards`);
  }
  const ms = median(samples);
  result.runs.packed = { ms, samplesMs: samples, batches: stats.batches, tokens: stats.tokens, computedTokens: stats.paddedTokens, seqPerS: (a.n / ms) * 1e3, tokPerS: (tokens / ms) * 1e3, check };
  result.summary = { seqPerS: result.runs.packed.seqPerS, tokPerS: result.runs.packed.tokPerS };
  log(`${a.n} documents, ${tokens} tokens: ${result.summary.seqPerS.toFixed(1)} seq/s, ${result.summary.tokPerS.toFixed(0)} tokens/s`);
} catch (e) {
  result.errors.push({ run: 'packed', error: String(e?.stack ?? e).slice(0, 2000) });
  log(`FAILED: ${e?.message ?? e}`);
} finally {
  save();
  loaded.model.dispose();
}
