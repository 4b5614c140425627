/**
 * `fastkernels e2e` on a pipeline folder (model_index.json: FLUX.1): model-zoo's pipelineE2e over the baseline and the
 * candidate set (or the baseline again, --self-test) on one image per --prompt at --size / --steps, seeds --seed,
 * --seed + 1, ...: per-step latents and the images' PSNR against the baseline's, images/s and per-step latency with
 * intervals. Prints a summary; --out / --json write the result (PSNR null where the images are equal).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { UserError, setCaptureBlocker, type Backend, type DType, type ModuleRegistry } from '@fastkernels/core';
import { pipelineE2e, type CandidateOverride, type Estimate } from '@fastkernels/model-zoo';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';

export interface PipelineE2eArgs {
  model: string | string[];
  selfTest?: boolean;
  graphs: boolean;
  warmups: number;
  repeats: number;
  out?: string;
  json?: boolean;
  prompt?: string[];
  size?: number;
  steps?: number;
  seed?: number;
  maxSequenceLength?: number;
}

const fmt = (e: Estimate, digits = 2) => `${e.mean.toFixed(digits)} [${e.ci95[0].toFixed(digits)}, ${e.ci95[1].toFixed(digits)}]`;

export function runPipelineE2e(argv: PipelineE2eArgs, io: Io, on: { readonly backend: Backend; readonly baseline: ModuleRegistry; readonly set: readonly CandidateOverride[]; readonly dtype?: DType }): void {
  const models = Array.isArray(argv.model) ? argv.model : [argv.model];
  if (models.length !== 1) throw new UserError('e2e takes one pipeline folder at a time', { field: '--model' });
  const dir = models[0]!;
  const prompts = argv.prompt?.length ? argv.prompt.map(String) : ['a red fox in the snow'];
  if (prompts.some((p) => !p.trim())) throw new UserError('a prompt is empty', { field: '--prompt' });
  const size = intFlag('size', argv.size ?? 1024, 1, 1 << 14);
  const steps = intFlag('steps', argv.steps ?? 28, 1, 1000);
  const seed = intFlag('seed', argv.seed ?? 0, 0, Number.MAX_SAFE_INTEGER);
  const maxSequenceLength = intFlag('max-sequence-length', argv.maxSequenceLength ?? 512, 1, 512);
  const requests = prompts.map((prompt, i) => ({ prompt, height: size, width: size, steps, seed: seed + i, maxSequenceLength }));
  const candidate = on.baseline.child('candidate');
  for (const c of on.set) candidate.override(c.taskId, c.cls);
  const log = (l: string) => io.err(`${l}\n`);
  // As the LLM e2e: a candidate that cannot be recorded into a CUDA graph (a PyTorch worker's) turns the step's graph
  // off on both sides, so the comparison stays like with like (a captured step would replay without calling it)
  const wouldCapture = argv.graphs !== false && on.backend.capabilities.graphs;
  const graphsReason = wouldCapture ? setCaptureBlocker(on.set) : undefined;
  if (graphsReason) log(`CUDA graphs off on both sides (the transformer step runs eagerly, baseline included): ${graphsReason}`);
  const r = pipelineE2e(on.baseline, candidate, {
    dir, backend: on.backend, requests, graphs: argv.graphs !== false && !graphsReason, log,
    warmups: intFlag('warmups', argv.warmups, 1, 1000), repeats: intFlag('repeats', argv.repeats, 1, 1000), ...(on.dtype ? { dtype: on.dtype } : {}),
  });
  const record = { model: dir, mode: argv.selfTest ? 'self-test' : 'composed', gpu: on.backend.devices()[0]?.name ?? on.backend.name, candidates: on.set.map((c) => c.taskId), size, steps, prompts: prompts.length, ...(graphsReason ? { graphs: false, graphsReason } : {}), ...r };
  const text = JSON.stringify(record, null, 2) + '\n';
  if (argv.out) {
    mkdirSync(dirname(resolve(argv.out)), { recursive: true });
    writeFileSync(argv.out, text);
  }
  if (argv.json) return io.out(text);
  const c = r.correctness;
  io.out(`${dir}: ${prompts.length} image${prompts.length === 1 ? '' : 's'} at ${size}x${size}, ${steps} steps; candidates: ${on.set.map((s) => s.taskId).join(', ') || 'none (the baseline)'}\n`);
  io.out(`  images/s   baseline ${fmt(r.baseline.imagesPerS, 3)}  candidate ${fmt(r.candidate.imagesPerS, 3)}  speedup ${fmt(r.speedup.imagesPerS)}\n`);
  io.out(`  step ms    baseline ${fmt(r.baseline.stepMs, 1)}  candidate ${fmt(r.candidate.stepMs, 1)}  speedup ${fmt(r.speedup.stepLatency)}\n`);
  io.out(`  correct    ${c.passed ? 'yes' : `no: ${c.reason}`}; latents max rel err ${c.maxStepError.toExponential(2)}; image PSNR min ${Math.min(...c.psnr).toFixed(1)} dB\n`);
}
