import { F, hostArray, type HostArray, type TaskCase, type TaskMetaInput, type Tensor } from '@fastkernels/core';
import { decodeDims } from './paged_decode_attention.js';
import { slidingWindowOfLeft } from './trtllm-kv-layout.js';

/**
 * What the attention tasks with a production library's interface share: flash_attn_varlen_func's (L1/flash_attn_prefill,
 * L1/flash_attn_decode) and FlashInfer trtllm-gen's (L1/flashinfer_prefill, L1/flashinfer_decode). The models that call
 * them, their head shapes, the constructor arguments read back from a case, and the bmm2 scale.
 */

/** The architectures whose vLLM attention backends call these kernels. */
export const INTERFACE_ARCHITECTURES = [
  'bitnet', 'cosyvoice3', 'gemma4', 'gpt_oss', 'hunyuan_video', 'jamba', 'llama', 'llama_eagle3', 'mixtral', 'qwen2_5_omni',
  'qwen2_vl', 'qwen3_next', 'qwen3_vl', 'whisper',
];

/** Attention heads of a model: [query heads, kv heads, head dim]. */
export type Heads = [number, number, number];
/** Llama-3-8B: 32 query heads of 128 over 8. */
export const LLAMA3: Heads = [32, 8, 128];
/** gpt-oss-20b / -120b: 64 query heads of 64 over 8 kv heads; sliding layers of 128 (window_size (127, 0)), sinks. */
export const GPT_OSS: Heads = [64, 8, 64];
/** Mixtral-8x7B: 32 query heads of 128 over 8. */
export const MIXTRAL: Heads = [32, 8, 128];
/** Qwen3-30B-A3B: 32 query heads of 128 over 4. */
export const QWEN3_MOE: Heads = [32, 4, 128];

/** A decode case: B sequences of up to S tokens, `spare` unused cache blocks (decodeDims), the task's init and sinks. */
export function pagedDecodeCase(name: string, dtype: 'f32' | 'bf16', B: number, heads: Heads, S: number, spare: number, init: unknown[], sinks = false) {
  const [NQ, NKV, D] = heads;
  return { name, dtype, dims: decodeDims(B, NQ, NKV, D, S, spare), init, options: sinks ? { sinks: true } : {} };
}

// ------------------------------------------------------------------------------------------- flash_attn_varlen_func

/** FlashAttention's window_size (left, right): -1 = unbounded on that side. */
export type WindowSize = readonly [number, number];

/**
 * FlashAttention's window_size as our ops' sliding_window: (left, right) keeps keys with pos - left <= j <= pos + right;
 * the ops keep the last w keys (pos - j < w), so w = left + 1 (vLLM passes (w - 1, 0) for a window of w). Causal sets
 * the right side to 0 (as flash-attn does); a bounded right side without causal is not a production form and is refused.
 */
export function slidingWindowOf(windowSize: WindowSize, causal: boolean): number {
  const [left, right] = windowSize;
  if (right >= 0 && !causal) throw new RangeError(`window_size (${left}, ${right}): a bounded right window is supported only with causal (where it is 0)`);
  return left < 0 ? 0 : left + 1;
}

/** Largest difference of consecutive offsets (flash-attn's max_seqlen_q / max_seqlen_k). */
export function maxSeqlen(cuSeqlens: ArrayLike<number>): number {
  let max = 0;
  for (let b = 0; b + 1 < cuSeqlens.length; b++) max = Math.max(max, cuSeqlens[b + 1]! - cuSeqlens[b]!);
  return max;
}

/** flash_attn_varlen_func's arguments as constructor parameters (softmax_scale, causal, window_size); causal's default is the task's. */
export function flashAttnInit(causalDefault: boolean): TaskMetaInput['init'] {
  return [
    { name: 'softmaxScale', type: 'float', optional: true, doc: 'default 1 / sqrt(D)' },
    { name: 'causal', type: 'bool', optional: true, default: causalDefault },
    { name: 'windowSize', type: 'object', optional: true, default: [-1, -1], doc: '(left, right), -1 = unbounded; vLLM passes (w - 1, 0)' },
  ];
}

/** A case's (softmax_scale, causal, window_size) with their defaults: the scale, causal, and the ops' sliding window. */
export function flashAttnInitOf(c: TaskCase, causalDefault: boolean): { scale: number; causal: boolean; window: number } {
  const causal = (c.init[1] as boolean | undefined) ?? causalDefault;
  return {
    scale: (c.init[0] as number | null | undefined) ?? 1 / Math.sqrt(c.dims.D!),
    causal,
    window: slidingWindowOf((c.init[2] as WindowSize | undefined) ?? [-1, -1], causal),
  };
}

// ------------------------------------------------------------------------------------------- FlashInfer trtllm-gen

/** trtllm-gen's scales and window as constructor parameters (bmm1_scale, bmm2_scale, window_left). */
export const TRTLLM_INIT: TaskMetaInput['init'] = [
  { name: 'bmm1Scale', type: 'float', doc: 'q_scale * k_scale * softmax_scale' },
  { name: 'bmm2Scale', type: 'float', optional: true, default: 1, doc: 'v_scale (multiplies the output)' },
  { name: 'windowLeft', type: 'int', optional: true, default: -1, doc: 'sliding window w - 1; -1 = none' },
];

/** A case's (bmm1_scale, bmm2_scale, window_left) with their defaults, the window as the ops' sliding window. */
export function trtllmInitOf(c: TaskCase): { bmm1: number; bmm2: number; window: number } {
  return { bmm1: c.init[0] as number, bmm2: (c.init[1] as number | undefined) ?? 1, window: slidingWindowOfLeft((c.init[2] as number | undefined) ?? -1) };
}

/** The attention output times bmm2_scale (the same tensor when it is 1; else `out` is disposed). */
export function scaledByBmm2(out: Tensor, bmm2Scale: number): Tensor {
  if (bmm2Scale === 1) return out;
  const scaled = F.mul(out, bmm2Scale);
  out.dispose();
  return scaled;
}

/** Float64: the reference's output times bmm2_scale. */
export const scaledReference = (out: HostArray, bmm2Scale: number): HostArray => hostArray(out.shape, out.data.map((x) => x * bmm2Scale));
