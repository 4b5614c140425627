/**
 * Write a seeded random checkpoint in the production naming: DIR/config.json (the given raw config, with the dtype
 * recorded as transformers 4 and 5 read it) and DIR/model.safetensors, one tensor made and written at a time. The
 * tensors are a plan's (planWeights over the module tree, built on the meta backend by the caller), so what is written
 * is exactly what loading expects.
 */
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DTYPE_INFO, numel, type DType } from '@fastkernels/core';
import { encodeValues } from './encode.js';
import { tensorDraws } from './init-scale.js';
import { drawValues, poolSegments, poolSize, poolValues } from './random-init.js';
import { writeSafetensors, type WriteEntry } from './safetensors.js';
import { uniqueTensors, type TensorKind, type WeightMapping, type WeightRules } from './weight-plan.js';

export interface CheckpointWriteOptions {
  readonly seed: number;
  readonly dtype: DType;
  /** The config.json the raw config came from: copied as is when it already records this dtype. */
  readonly configPath?: string;
  /** The std of the random values (the family's initializer_range). */
  readonly std: number;
  /** Per-fan-in init (WeightRules.init); the values are then drawn per tensor, `tiled` or not. */
  readonly init?: WeightRules['init'];
  /**
   * Tile each tensor from three seeded pools (the weights initWeightsOnDevice fills): an 8B checkpoint in seconds
   * instead of minutes; the values repeat with the pool's period, fine for timing and comparing runs.
   */
  readonly tiled?: boolean;
  /** The family's own draws (WeightRules.draws): integer tensors (MXFP4 blocks / scales) are drawn per tensor even when tiled. */
  readonly draws?: WeightRules['draws'];
}

export interface WrittenCheckpoint {
  readonly files: string[];
  readonly tensors: number;
  readonly bytes: number;
}

/** Write the checkpoint of a (world-1) plan: random values per tensor, or pool tiles. */
export function writeRandomCheckpoint(outDir: string, rawConfig: Record<string, unknown>, plan: readonly WeightMapping[], opts: CheckpointWriteOptions): WrittenCheckpoint {
  const tensors = uniqueTensors(plan);
  const drawOf = tensorDraws(tensors, { initStd: opts.std, ...(opts.init ? { init: opts.init } : {}), ...(opts.draws ? { draws: opts.draws } : {}) });
  const drawn = (m: WeightMapping) => encodeValues(drawValues(m, drawOf(m), opts.seed), m.dtype ?? opts.dtype);
  if (!opts.tiled || opts.init) return writeCheckpoint(outDir, rawConfig, tensors, opts, drawn);
  const N = poolSize(plan);
  const item = DTYPE_INFO[opts.dtype].itemsize;
  const pools = new Map<TensorKind, Uint8Array>();
  const pool = (kind: TensorKind) => {
    let b = pools.get(kind);
    if (!b) pools.set(kind, (b = encodeValues(poolValues(opts.std, opts.seed, N, kind), opts.dtype)));
    return b;
  };
  return writeCheckpoint(outDir, rawConfig, tensors, opts, (m) => {
    if (m.dtype) return drawn(m);
    const src = pool(m.kind);
    const out = new Uint8Array(numel(m.shape) * item);
    let off = 0;
    for (const [start, len] of poolSegments(m, opts.seed, N)) {
      out.set(src.subarray(start * item, (start + len) * item), off * item);
      off += len;
    }
    return out;
  });
}

/** DIR/model.safetensors from per-tensor bytes (made one tensor at a time), and DIR/config.json with the dtype recorded. */
export function writeCheckpoint(outDir: string, rawConfig: Record<string, unknown>, tensors: readonly WeightMapping[], opts: { dtype: DType; configPath?: string }, bytesOf: (m: WeightMapping) => Uint8Array): WrittenCheckpoint {
  if (tensors.some((m) => m.slice)) throw new Error('writeRandomCheckpoint: the plan holds a rank\'s slices; write from a world-1 plan');
  mkdirSync(outDir, { recursive: true });
  const entries: WriteEntry[] = tensors.map((m) => ({ name: m.hfName, dtype: m.dtype ?? opts.dtype, shape: m.shape, bytes: () => bytesOf(m) }));
  const st = join(outDir, 'model.safetensors');
  writeSafetensors(st, entries, { format: 'pt' });
  const cfgOut = join(outDir, 'config.json');
  const torchName = DTYPE_INFO[opts.dtype].torchName;
  const recorded = rawConfig.dtype ?? rawConfig.torch_dtype;
  if (opts.configPath && recorded === torchName) copyFileSync(opts.configPath, cfgOut);
  else writeFileSync(cfgOut, JSON.stringify({ ...rawConfig, torch_dtype: torchName, ...(rawConfig.dtype !== undefined ? { dtype: torchName } : {}) }, null, 2) + '\n');
  const bytes = tensors.reduce((a, m) => a + numel(m.shape) * DTYPE_INFO[m.dtype ?? opts.dtype].itemsize, 0);
  return { files: [cfgOut, st], tensors: tensors.length, bytes };
}
