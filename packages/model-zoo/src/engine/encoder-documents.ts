/**
 * Seeded documents for the encoder's e2e and capture (runner 'encoder': BGE-M3, ColBERTv2): token-id sequences with
 * lengths drawn uniformly from a range, and the encoder runner set up as `fastkernels embed` sets it up (the packed
 * production path, the model's own poolings, the special ids sparse pooling leaves out).
 */
import { Rng, UserError, type Backend, type DType, type ModuleRegistry } from '@fastkernels/core';
import { loadEncoderModel, loadModelFolderConfig, type LoadedModel } from '../models/load-model.js';
import { EncoderRunner, isPackedEncoder, type EncoderModel, type Pooling } from './encoder-runner.js';

export interface DocumentSpec {
  readonly count: number;
  /** Lengths in tokens, uniform over [lo, hi] (inclusive). */
  readonly lengths: readonly [number, number];
  readonly seed: number;
}

/** `LO-HI` or `U[LO, HI]` -> [lo, hi]; a UserError naming --lengths otherwise. */
export function parseLengthRange(text: string): [number, number] {
  const m = /^\s*(?:U\[\s*(\d+)\s*,\s*(\d+)\s*\]|(\d+)\s*-\s*(\d+))\s*$/i.exec(text);
  const lo = Number(m?.[1] ?? m?.[3]);
  const hi = Number(m?.[2] ?? m?.[4]);
  if (!m || !(lo >= 1 && hi >= lo)) throw new UserError(`expected LO-HI or U[LO, HI] with 1 <= LO <= HI, got '${text}'`, { field: '--lengths' });
  return [lo, hi];
}

/** The index's workload name of a document spec: `documents:N:LO-HI:SEED`. */
export function documentsWorkloadName(d: DocumentSpec): string {
  return `documents:${d.count}:${d.lengths[0]}-${d.lengths[1]}:${d.seed}`;
}

/**
 * `count` sequences of ids drawn from the vocabulary above the special ids (pad / bos / eos / cls: a pad inside a
 * document would be a dropped ColBERT token, a special id a sparse weight the pooling leaves out).
 */
export function seededDocuments(d: DocumentSpec, vocabSize: number, specialIds: readonly number[], maxLength: number): number[][] {
  if (d.lengths[1] > maxLength) throw new UserError(`documents up to ${d.lengths[1]} tokens, but the model takes at most ${maxLength}`, { field: '--lengths' });
  const lowest = Math.max(-1, ...specialIds) + 1;
  if (lowest >= vocabSize) throw new UserError(`the vocabulary (${vocabSize}) has no ids above the special ones`, { field: '--model' });
  const rng = new Rng(d.seed);
  return Array.from({ length: d.count }, () => Array.from({ length: rng.int(d.lengths[0], d.lengths[1] + 1) }, () => rng.int(lowest, vocabSize)));
}

/** The documents of a spec for an encoder folder (its vocabulary, longest sequence and special ids). */
export function documentsFor(dir: string, d: DocumentSpec): number[][] {
  const { geometry, raw } = loadModelFolderConfig(dir);
  return seededDocuments(d, geometry.vocabSize, specialIdsOf(raw), geometry.maxPositionEmbeddings);
}

/** config.json's pad / bos / eos ids (sparse pooling leaves them out, as FlagEmbedding does). */
function specialIdsOf(raw: Record<string, unknown>, pad: unknown = raw.pad_token_id): number[] {
  return [pad, raw.bos_token_id, raw.eos_token_id].filter((x): x is number => typeof x === 'number');
}

export interface LoadedEncoder {
  readonly loaded: LoadedModel<unknown, EncoderModel>;
  readonly runner: EncoderRunner;
  /** What the model produces: its dense head (else CLS), sparse weights and multi-vectors where it has them. */
  readonly poolings: Pooling[];
  /** pad / bos / eos of config.json. */
  readonly specialIds: number[];
}

/** Load an encoder folder from `registry` and its runner, as `fastkernels embed` does. */
export function loadEncoder(dir: string, o: { backend: Backend; registry: ModuleRegistry; dtype?: DType; initSeed?: number; randomInit?: 'host' | 'device'; maxNumBatchedTokens?: number }): LoadedEncoder {
  const loaded = loadEncoderModel(dir, {
    backend: o.backend, registry: o.registry, ...(o.dtype ? { dtype: o.dtype } : {}), ...(o.initSeed !== undefined ? { initSeed: o.initSeed } : {}), ...(o.randomInit ? { randomInit: o.randomInit } : {}),
  });
  const pad = (loaded.config as { padTokenId?: number }).padTokenId;
  const specialIds = specialIdsOf(loadModelFolderConfig(dir).raw, pad);
  const m = loaded.model;
  const poolings: Pooling[] = [isPackedEncoder(m) && m.dense ? 'dense' : 'cls'];
  if (isPackedEncoder(m) && m.sparse) poolings.push('sparse');
  if (isPackedEncoder(m) && (m.colbert || m.vectors)) poolings.push('multi-vector');
  const runner = new EncoderRunner(m, loaded.ctx, {
    padTokenId: pad ?? 0,
    skipTokenIds: specialIds,
    maxLength: loaded.geometry.maxPositionEmbeddings,
    ...(o.maxNumBatchedTokens !== undefined ? { maxNumBatchedTokens: o.maxNumBatchedTokens } : {}),
  });
  return { loaded, runner, poolings, specialIds };
}
