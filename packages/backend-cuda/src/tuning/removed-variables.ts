/**
 * The per-knob variables that tuning files replaced. A script that still sets one would otherwise measure the default
 * while believing it measured the knob, so a set one is an error that names the key and the command that replaces it.
 */
import { UserError, type Environment } from '@fastkernels/core';

/** Old variable -> tuning key, and how its value reads as the key's value. */
export const REMOVED_TUNING_VARIABLES: Readonly<Record<string, { key: string; value: (raw: string) => string }>> = {
  FASTKERNELS_PDL: { key: 'launch.pdl', value: onOff },
  FASTKERNELS_PDL_EAGER: { key: 'launch.pdlEager', value: onOff },
  FASTKERNELS_GEMV_MAX_ROWS: { key: 'linear.gemvMaxRows', value: same },
  FASTKERNELS_GEMV_WARPS_PER_SM: { key: 'linear.gemvStreamWarpsPerSm', value: same },
  FASTKERNELS_GEMV_UNROLL: { key: 'linear.gemvUnroll', value: same },
  FASTKERNELS_FUSE_GLU: { key: 'linear.gemvFuseGlu', value: onOff },
  FASTKERNELS_GEMV_LATE_TRIGGER: { key: 'linear.gemvLateTrigger', value: same },
  FASTKERNELS_FUSE_NORM: { key: 'linear.gemvFuseNorm', value: onOff },
  FASTKERNELS_GEMV_NORM_PREFETCH: { key: 'linear.gemvNormPrefetch', value: onOff },
  FASTKERNELS_FUSE_ROTARY_KV: { key: 'rotary.fuseKvStore', value: onOff },
  FASTKERNELS_DECODE_MMA_WARPS: { key: 'attention.decodeMmaWarps', value: same },
  FASTKERNELS_DECODE_MMA_STAGES: { key: 'attention.decodeMmaStages', value: same },
  FASTKERNELS_DECODE_CTAS_PER_SM: { key: 'attention.decodeMmaCtasPerSm', value: same },
  FASTKERNELS_DECODE_MIN_SPLIT_TOKENS: { key: 'attention.decodeMmaMinSplitTokens', value: same },
  FASTKERNELS_DECODE_EARLY_KV: { key: 'attention.decodeEarlyKv', value: onOff },
  FASTKERNELS_DECODE_COMBINE_UNROLL: { key: 'attention.decodeCombineUnroll', value: same },
  FASTKERNELS_PREFILL_WGMMA: { key: 'attention.prefillWgmma', value: onOff },
  FASTKERNELS_SOFTMAX_LONG_NPT: { key: 'softmax.longRowVectors', value: same },
  FASTKERNELS_SOFTMAX_CLUSTER_ROWS: { key: 'softmax.clusterMaxRows', value: same },
  FASTKERNELS_SOFTMAX_CLUSTER: { key: 'softmax.clusterSize', value: same },
  FASTKERNELS_SAMPLER_UNHINTED: { key: 'sampler.unhinted', value: same },
  FASTKERNELS_SAMPLER_GREEDY_SPLIT_ROWS: { key: 'sampler.greedySplitMaxRows', value: same },
  FASTKERNELS_CHAIN_DECODE: { key: 'engine.chainDecode', value: onOff },
};

function onOff(raw: string): string {
  return raw === '0' ? 'false' : raw === '1' ? 'true' : raw;
}

function same(raw: string): string {
  return raw;
}

/** A UserError for the removed variables set (non-empty) in env, or undefined. */
export function removedVariablesError(env: Environment): UserError | undefined {
  const set = Object.keys(REMOVED_TUNING_VARIABLES).filter((n) => env[n] !== undefined && env[n] !== '');
  if (!set.length) return undefined;
  const sets = set.map((n) => `--set ${REMOVED_TUNING_VARIABLES[n]!.key}=${REMOVED_TUNING_VARIABLES[n]!.value(env[n]!)}`).join(' ');
  return new UserError(`${set.join(', ')} ${set.length > 1 ? 'are' : 'is'} no longer read: kernel launch choices live in tuning files (docs/tuning.md)`, {
    field: set[0],
    fix: `unset ${set.join(' ')} and run with FASTKERNELS_TUNING=$(fastkernels tuning derive ${sets} --out <file>)`,
  });
}
