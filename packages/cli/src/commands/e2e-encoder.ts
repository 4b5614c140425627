/**
 * `fastkernels e2e` on an encoder folder (runner 'encoder': BGE-M3, ColBERTv2): model-zoo's encoderE2e over the
 * baseline and the candidate set (or the baseline again, --self-test) on --documents seeded token-id sequences with
 * lengths uniform over --lengths, embedded through the encoder runner's packed path (--max-num-batched-tokens per
 * forward): per-document cosines of every output against the baseline's, sequences/s and tokens/s with intervals.
 * Prints a summary; --out / --json write the result. The encoder runner captures no CUDA graphs, so no graph switch.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { documentsFor, encoderE2e, loadModelFolderConfig, parseLengthRange, type DocumentSpec } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';
import {
  candidateNames, candidateRegistry, emitRecord, formatEstimate as fmt, recordHead, seedFlag, singleFolder, timingCounts, type E2eCommonArgs, type E2eSides,
} from './e2e-common.js';

/** The options of an encoder folder's documents, in e2e and capture alike (--seed is a common flag). */
export interface DocumentArgs {
  /** How many documents (e2e: 256, capture: 64 by default). */
  documents?: number;
  /** Their lengths: LO-HI or U[LO, HI] (default U[32, 512]). */
  lengths?: string;
  seed?: number;
  maxNumBatchedTokens: number;
}

export interface EncoderE2eArgs extends E2eCommonArgs, DocumentArgs {}

/** Whether a folder holds an encoder (config.json whose architecture's runner is 'encoder'). */
export function isEncoderFolder(dir: string): boolean {
  return existsSync(join(dir, 'config.json')) && loadModelFolderConfig(dir).architecture.runner === 'encoder';
}

/** The encoder folders' flags with their help (e2e and capture, which differ in how many documents by default). */
export function encoderFlags<T>(y: Argv<T>, defaultDocuments: number) {
  return y
    .option('documents', { type: 'number', describe: `encoder folders (BGE-M3, ColBERTv2): seeded token-id documents (--seed), packed by --max-num-batched-tokens [default: ${defaultDocuments}]` })
    .option('lengths', { type: 'string', describe: 'encoder folders: document lengths, uniform: LO-HI or U[LO, HI] [default: U[32, 512]]' });
}

/** The documents the encoder flags ask for (what model-zoo's documentsFor draws from). */
export function documentSpec(argv: DocumentArgs, defaultDocuments: number): DocumentSpec {
  return { count: intFlag('documents', argv.documents ?? defaultDocuments, 1, 1 << 20), lengths: parseLengthRange(argv.lengths ?? 'U[32, 512]'), seed: seedFlag(argv.seed) };
}

/** --max-num-batched-tokens: the tokens of one packed forward. */
export function packedTokensFlag(argv: DocumentArgs): number {
  return intFlag('max-num-batched-tokens', argv.maxNumBatchedTokens, 1, 1 << 20);
}

export const E2E_DOCUMENTS = 256;

export function runEncoderE2e(argv: EncoderE2eArgs, io: Io, on: E2eSides): void {
  const dir = singleFolder(argv, 'encoder');
  const spec = documentSpec(argv, E2E_DOCUMENTS);
  const documents = documentsFor(dir, spec);
  const candidate = candidateRegistry(on);
  const r = encoderE2e(on.baseline, candidate, {
    dir, backend: on.backend, documents, log: (l) => io.err(`${l}\n`), maxNumBatchedTokens: packedTokensFlag(argv), ...timingCounts(argv, 1), ...(on.dtype ? { dtype: on.dtype } : {}),
  });
  if (emitRecord(argv, io, { ...recordHead(dir, argv, on), lengths: spec.lengths, seed: spec.seed, ...r })) return;
  const c = r.correctness;
  io.out(`${dir}: ${r.documents} documents (${r.tokens} tokens, lengths U[${spec.lengths[0]}, ${spec.lengths[1]}]), ${r.dtype}, ${r.baseline.batches} packed batches; outputs ${r.poolings.join(', ')} (timed: ${r.timedPoolings.join(', ')}); candidates: ${candidateNames(on)}\n`);
  io.out(`  sequences/s  baseline ${fmt(r.baseline.sequencesPerS, 1)}  candidate ${fmt(r.candidate.sequencesPerS, 1)}\n`);
  io.out(`  tokens/s     baseline ${fmt(r.baseline.tokensPerS, 0)}  candidate ${fmt(r.candidate.tokensPerS, 0)}\n`);
  io.out(`  speedup      ${fmt(r.speedup, 3)}\n`);
  io.out(`  correct      ${c.passed ? 'yes' : `no: ${c.reason}`}; ${c.identical}/${r.documents} identical; least cosine ${c.worst.toFixed(7)} (threshold ${c.minCosine})\n`);
}
