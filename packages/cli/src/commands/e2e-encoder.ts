/**
 * `fastkernels e2e` on an encoder folder (runner 'encoder': BGE-M3, ColBERTv2): model-zoo's encoderE2e over the
 * baseline and the candidate set (or the baseline again, --self-test) on --documents seeded token-id sequences with
 * lengths uniform over --lengths, embedded through the encoder runner's packed path (--max-num-batched-tokens per
 * forward): per-document cosines of every output against the baseline's, sequences/s and tokens/s with intervals.
 * Prints a summary; --out / --json write the result. The encoder runner captures no CUDA graphs, so no graph switch.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { UserError, type Backend, type DType, type ModuleRegistry } from '@fastkernels/core';
import { documentsFor, encoderE2e, loadModelFolderConfig, parseLengthRange, type CandidateOverride, type Estimate } from '@fastkernels/model-zoo';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';

export interface EncoderE2eArgs {
  model: string | string[];
  selfTest?: boolean;
  warmups: number;
  repeats: number;
  out?: string;
  json?: boolean;
  /** How many documents (default 256). */
  documents?: number;
  /** Their lengths: LO-HI or U[LO, HI] (default U[32, 512]). */
  lengths?: string;
  seed?: number;
  maxNumBatchedTokens: number;
}

/** Whether a folder holds an encoder (config.json whose architecture's runner is 'encoder'). */
export function isEncoderFolder(dir: string): boolean {
  return existsSync(join(dir, 'config.json')) && loadModelFolderConfig(dir).architecture.runner === 'encoder';
}

const fmt = (e: Estimate, digits = 1) => `${e.mean.toFixed(digits)} [${e.ci95[0].toFixed(digits)}, ${e.ci95[1].toFixed(digits)}]`;

export function runEncoderE2e(argv: EncoderE2eArgs, io: Io, on: { readonly backend: Backend; readonly baseline: ModuleRegistry; readonly set: readonly CandidateOverride[]; readonly dtype?: DType }): void {
  const models = Array.isArray(argv.model) ? argv.model : [argv.model];
  if (models.length !== 1) throw new UserError('e2e takes one encoder folder at a time', { field: '--model' });
  const dir = models[0]!;
  const spec = {
    count: intFlag('documents', argv.documents ?? 256, 1, 1 << 20),
    lengths: parseLengthRange(argv.lengths ?? 'U[32, 512]'),
    seed: intFlag('seed', argv.seed ?? 0, 0, Number.MAX_SAFE_INTEGER),
  };
  const documents = documentsFor(dir, spec);
  const candidate = on.baseline.child('candidate');
  for (const c of on.set) candidate.override(c.taskId, c.cls);
  const r = encoderE2e(on.baseline, candidate, {
    dir, backend: on.backend, documents, log: (l) => io.err(`${l}\n`),
    maxNumBatchedTokens: intFlag('max-num-batched-tokens', argv.maxNumBatchedTokens, 1, 1 << 20),
    warmups: intFlag('warmups', argv.warmups, 1, 1000), repeats: intFlag('repeats', argv.repeats, 1, 1000), ...(on.dtype ? { dtype: on.dtype } : {}),
  });
  const record = { model: dir, mode: argv.selfTest ? 'self-test' : 'composed', gpu: on.backend.devices()[0]?.name ?? on.backend.name, candidates: on.set.map((c) => c.taskId), lengths: spec.lengths, seed: spec.seed, ...r };
  const text = JSON.stringify(record, null, 2) + '\n';
  if (argv.out) {
    mkdirSync(dirname(resolve(argv.out)), { recursive: true });
    writeFileSync(argv.out, text);
  }
  if (argv.json) return io.out(text);
  const c = r.correctness;
  io.out(`${dir}: ${r.documents} documents (${r.tokens} tokens, lengths U[${spec.lengths[0]}, ${spec.lengths[1]}]), ${r.dtype}, ${r.baseline.batches} packed batches; outputs ${r.poolings.join(', ')} (timed: ${r.timedPoolings.join(', ')}); candidates: ${on.set.map((s) => s.taskId).join(', ') || 'none (the baseline)'}\n`);
  io.out(`  sequences/s  baseline ${fmt(r.baseline.sequencesPerS)}  candidate ${fmt(r.candidate.sequencesPerS)}\n`);
  io.out(`  tokens/s     baseline ${fmt(r.baseline.tokensPerS, 0)}  candidate ${fmt(r.candidate.tokensPerS, 0)}\n`);
  io.out(`  speedup      ${fmt(r.speedup, 3)}\n`);
  io.out(`  correct      ${c.passed ? 'yes' : `no: ${c.reason}`}; ${c.identical}/${r.documents} identical; least cosine ${c.worst.toFixed(7)} (threshold ${c.minCosine})\n`);
}
