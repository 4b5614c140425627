/**
 * Shape and dtype inference of the matmul, conv, attention, quant and recurrent specs, without a backend
 * (inferOp: arity, dtypes, attrs and every shape check; hand-computed output shapes and the errors' wording).
 */
import { describe, expect, it } from 'vitest';
import type { DType } from '../dtype.js';
import { einsumPlan } from './matmul.js';
import { convOutputShape, convTransposeOutputShape, pooledSize } from './conv.js';
import { inferOp, OpError, type MetaArg } from './index.js';

const t = (shape: number[], dtype: DType = 'f32'): MetaArg => ({ shape, dtype });
const out = (name: string, inputs: MetaArg[], attrs?: unknown) => inferOp(name, inputs, attrs).outputs.map((m) => [m.dtype, [...m.shape]]);
const fails = (name: string, inputs: MetaArg[], attrs: unknown, re: RegExp) => {
  let err: unknown;
  try {
    inferOp(name, inputs, attrs);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(OpError);
  expect((err as Error).message).toMatch(re);
};

describe('matmul specs', () => {
  it('matmul follows torch.matmul for 1-D and batched operands', () => {
    expect(out('matmul', [t([3]), t([3])])).toEqual([['f32', []]]);
    expect(out('matmul', [t([3]), t([2, 3, 4])])).toEqual([['f32', [2, 4]]]);
    expect(out('matmul', [t([5, 2, 3]), t([3])])).toEqual([['f32', [5, 2]]]);
    expect(out('matmul', [t([2, 1, 4, 3], 'bf16'), t([7, 3, 5], 'bf16')])).toEqual([['bf16', [2, 7, 4, 5]]]);
    fails('matmul', [t([2, 3]), t([4, 5])], {}, /^matmul: input \[2, 3\] and other \[4, 5\] cannot be multiplied \(3 != 4\)/);
    fails('matmul', [t([2, 3]), t([3, 5], 'f16')], {}, /input is f32 but other is f16/);
    fails('matmul', [t([2, 3], 'i32'), t([3, 5], 'i32')], {}, /input has dtype i32; expected float dtypes/);
  });

  it('bmm, baddbmm, linear, grouped_gemm', () => {
    expect(out('bmm', [t([2, 3, 4]), t([2, 4, 5])])).toEqual([['f32', [2, 3, 5]]]);
    expect(out('baddbmm', [t([5]), t([2, 3, 4]), t([2, 4, 5])], { beta: 0 })).toEqual([['f32', [2, 3, 5]]]);
    fails('baddbmm', [t([2, 3, 5, 1]), t([2, 3, 4]), t([2, 4, 5])], {}, /input \[2, 3, 5, 1\] does not broadcast to \[2, 3, 5\]/);
    expect(out('linear', [t([7, 2, 8]), t([16, 8]), t([16])], { activation: 'gelu_tanh' })).toEqual([['f32', [7, 2, 16]]]);
    expect(out('linear', [t([8]), t([16, 8]), null])).toEqual([['f32', [16]]]);
    fails('linear', [t([7, 8]), t([16, 8]), t([15])], {}, /linear: bias \[15\] must be \[16\]/);
    fails('linear', [t([7, 8]), t([16, 8]), null], { activation: 'swish' }, /linear: bad arguments: activation/);
    expect(out('grouped_gemm', [t([10, 8]), t([4, 6, 8]), t([5], 'i32'), null, null])).toEqual([['f32', [10, 6]]]);
    expect(out('grouped_gemm', [t([10, 8]), t([4, 6, 8]), null, t([10], 'i64'), t([4, 6])])).toEqual([['f32', [10, 6]]]);
    fails('grouped_gemm', [t([10, 8]), t([4, 6, 8]), t([5], 'i32'), t([10], 'i64'), null], {}, /give exactly one of offsets/);
    fails('grouped_gemm', [t([10, 8]), t([4, 6, 8]), t([4], 'i32'), null, null], {}, /offsets \[4\] must be \[5\]/);
  });

  it('einsum plans: implicit output, ellipsis broadcast, diagonals, sizes', () => {
    const p = einsumPlan('bhqd,bhkd->bhqk', [[2, 3, 4, 8], [2, 3, 5, 8]]);
    expect(p.outShape).toEqual([2, 3, 4, 5]);
    expect(einsumPlan('...ij,...jk', [[2, 1, 4, 5], [3, 5, 6]]).outShape).toEqual([2, 3, 4, 6]);
    expect(einsumPlan('ii->i', [[3, 3]]).outShape).toEqual([3]);
    expect(einsumPlan('ij,jk', [[2, 3], [3, 4]]).output).toEqual(['i', 'k']);
    expect(einsumPlan('ba', [[2, 3]]).outShape).toEqual([3, 2]);
    expect(out('einsum', [t([2, 3]), t([1, 4])], { equation: 'ij,kl->ijkl' })).toEqual([['f32', [2, 3, 1, 4]]]);
    fails('einsum', [t([2, 3]), t([4, 2])], { equation: 'ij,jk->ik' }, /einsum\('ij,jk->ik'\): subscript 'j' has size 4 in operand 1 \[4, 2\] but 3 elsewhere/);
    fails('einsum', [t([2, 3])], { equation: 'ij->ii' }, /output subscript 'i' appears more than once/);
  });
});

describe('conv specs', () => {
  it('conv output shapes: stride, padding modes, dilation, groups, unbatched', () => {
    const a = { stride: 1, padding: 0, dilation: 1, groups: 1 } as const;
    expect(convOutputShape('conv2d', 2, { shape: [1, 3, 224, 224], dtype: 'f16' }, { shape: [64, 3, 7, 7], dtype: 'f16' }, { ...a, stride: 2, padding: 3 })).toEqual([1, 64, 112, 112]);
    expect(convOutputShape('conv2d', 2, { shape: [3, 10, 11], dtype: 'f32' }, { shape: [6, 1, 3, 4], dtype: 'f32' }, { ...a, padding: 'same', dilation: 2, groups: 3 })).toEqual([6, 10, 11]);
    expect(convOutputShape('conv1d', 1, { shape: [2, 4, 10], dtype: 'f32' }, { shape: [4, 4, 3], dtype: 'f32' }, { ...a, padding: 'valid', stride: 3 })).toEqual([2, 4, 3]);
    expect(out('conv3d', [t([1, 2, 5, 6, 7]), t([4, 2, 3, 3, 3]), t([4])], { padding: [1, 0, 1], stride: [1, 2, 2] })).toEqual([['f32', [1, 4, 5, 2, 4]]]);
    fails('conv2d', [t([1, 4, 5, 5]), t([2, 3, 3, 3]), null], {}, /given groups=1, weight \[2, 3, 3, 3\] expects input \[1, 4, 5, 5\] to have 3 channels, but it has 4/);
    fails('conv2d', [t([1, 4, 5, 5]), t([2, 4, 3, 3]), null], { padding: 'same', stride: 2 }, /'same' is not supported for strided/);
    fails('conv2d', [t([1, 4, 5, 5]), t([2, 4, 3, 3]), t([3])], {}, /conv2d: bias \[3\] must be \[2\]/);
    fails('conv1d', [t([1, 4, 5, 5]), t([2, 4, 3]), null], {}, /conv1d: expected a 3-D input/);
  });

  it('conv_transpose shapes and the output_padding rule', () => {
    const a = { stride: 2, padding: 1, output_padding: 1, groups: 1, dilation: 1 };
    expect(convTransposeOutputShape('conv_transpose2d', 2, { shape: [1, 8, 4, 4], dtype: 'f32' }, { shape: [8, 3, 3, 3], dtype: 'f32' }, a)).toEqual([1, 3, 8, 8]);
    expect(out('conv_transpose1d', [t([2, 4, 5]), t([4, 3, 3]), null], { groups: 2, stride: 3 })).toEqual([['f32', [2, 6, 15]]]);
    fails('conv_transpose1d', [t([2, 4, 5]), t([4, 3, 3]), null], { output_padding: 1 }, /output_padding \[1\] must be smaller than either stride \[1\] or dilation \[1\]/);
  });

  it('pool shapes: ceil_mode, padding limit, indices outputs, adaptive sizes', () => {
    expect(pooledSize('p', 5, 2, 0, 2, 1, true)).toBe(3);
    expect(pooledSize('p', 5, 2, 0, 2, 1, false)).toBe(2);
    expect(pooledSize('p', 5, 3, 1, 2, 1, true)).toBe(3); // the 4th window would start in the right padding
    expect(out('max_pool2d', [t([1, 3, 7, 6])], { kernel_size: 3, stride: 2, padding: 1 })).toEqual([['f32', [1, 3, 4, 3]]]);
    expect(out('max_pool2d_with_indices', [t([3, 7, 6])], { kernel_size: 2 })).toEqual([['f32', [3, 3, 3]], ['i64', [3, 3, 3]]]);
    expect(out('avg_pool3d', [t([1, 2, 5, 5, 5])], { kernel_size: 2, ceil_mode: true })).toEqual([['f32', [1, 2, 3, 3, 3]]]);
    expect(out('adaptive_avg_pool2d', [t([2, 3, 7, 5])], { output_size: [null, 2] })).toEqual([['f32', [2, 3, 7, 2]]]);
    expect(out('adaptive_max_pool1d_with_indices', [t([2, 3, 7])], { output_size: 4 })).toEqual([['f32', [2, 3, 4]], ['i64', [2, 3, 4]]]);
    fails('max_pool2d', [t([1, 1, 4, 4])], { kernel_size: 2, padding: 2 }, /padding \[2,2\] should be at most half of kernel_size \[2,2\]/);
    fails('max_pool1d', [t([1, 1, 4])], { kernel_size: 5 }, /output size is too small/);
    fails('avg_pool1d', [t([1, 1, 4])], { kernel_size: 2, divisor_override: 2 }, /has no divisor_override/);
    fails('adaptive_avg_pool2d', [t([1, 2, 0, 3])], { output_size: 2 }, /empty spatial dim/);
  });
});

describe('attention, quant and recurrent specs', () => {
  it('scaled_dot_product_attention: GQA, masks, value head dim', () => {
    expect(out('scaled_dot_product_attention', [t([2, 8, 5, 64], 'bf16'), t([2, 2, 9, 64], 'bf16'), t([2, 2, 9, 32], 'bf16'), null], { enable_gqa: true })).toEqual([['bf16', [2, 8, 5, 32]]]);
    expect(out('scaled_dot_product_attention', [t([2, 4, 5, 16]), t([2, 4, 9, 16]), t([2, 4, 9, 16]), t([5, 9], 'bool')])).toEqual([['f32', [2, 4, 5, 16]]]);
    fails('scaled_dot_product_attention', [t([2, 8, 5, 64]), t([2, 2, 9, 64]), t([2, 2, 9, 64]), null], {}, /different head counts need enable_gqa=true/);
    expect(out('paged_decode_attention', [t([3, 8, 64], 'bf16'), t([10, 16, 2, 64], 'bf16'), t([10, 16, 2, 64], 'bf16'), t([3, 4], 'i32'), t([3], 'i32')], { scale: 0.125 })).toEqual([['bf16', [3, 8, 64]]]);
    fails('paged_decode_attention', [t([3, 8, 64]), t([10, 16, 3, 64]), t([10, 16, 3, 64]), t([3, 4], 'i32'), t([3], 'i32')], { scale: 1 }, /8 query heads are not a multiple of 3 kv heads/);
    // v_head_dim: the values are the first dims of each row (MLA's latent rows: 576 wide, the value kv_lora_rank 512)
    const mla = [t([2, 32, 576], 'bf16'), t([10, 16, 1, 576], 'bf16'), t([10, 16, 1, 576], 'bf16'), t([2, 4], 'i32'), t([2], 'i32')];
    expect(out('paged_decode_attention', mla, { scale: 0.07, v_head_dim: 512 })).toEqual([['bf16', [2, 32, 512]]]);
    expect(out('paged_decode_attention', mla, { scale: 0.07, v_head_dim: 576 })).toEqual([['bf16', [2, 32, 576]]]);
    fails('paged_decode_attention', mla, { scale: 0.07, v_head_dim: 577 }, /v_head_dim 577 must be in 1\.\.576/);
    fails('paged_decode_attention', mla, { scale: 0.07, v_head_dim: 0 }, /v_head_dim 0 must be in 1\.\.576/);
    fails('paged_decode_attention', mla, { scale: 0.07, v_head_dim: 2.5 }, /bad arguments: v_head_dim/);
    expect(out('varlen_prefill_attention', [t([9, 8, 64]), t([12, 2, 64]), t([12, 2, 64]), t([3], 'i32'), t([3], 'i32')], { scale: 0.125, causal: true })).toEqual([['f32', [9, 8, 64]]]);
    fails('scaled_dot_product_attention', [t([2, 4, 5, 16]), t([2, 4, 9, 16]), t([2, 4, 9, 16]), t([5, 9], 'bool')], { is_causal: true }, /must not be given when is_causal/);
    fails('scaled_dot_product_attention', [t([2, 4, 5, 16]), t([2, 4, 9, 16]), t([2, 4, 9, 16]), t([5, 9], 'i32')], {}, /attn_mask must be bool or float/);
  });

  it('quant ops: output dtypes and scale shapes', () => {
    expect(out('scaled_fp8_quant', [t([4, 8], 'bf16'), null])).toEqual([['fp8e4m3', [4, 8]], ['f32', [1]]]);
    expect(out('per_token_group_quant_fp8', [t([3, 256], 'bf16')], { group_size: 128 })).toEqual([['fp8e4m3', [3, 256]], ['f32', [3, 2]]]);
    expect(out('fp8_dequant', [t([3, 4], 'fp8e4m3'), t([3, 1])])).toEqual([['bf16', [3, 4]]]);
    expect(out('scaled_mm', [t([3, 4], 'fp8e4m3'), t([4, 5], 'fp8e4m3'), t([3, 1]), t([1, 5]), null], { out_dtype: 'f16' })).toEqual([['f16', [3, 5]]]);
    expect(out('mxfp4_dequant', [t([4, 6, 2, 16], 'u8'), t([4, 6, 2], 'u8')])).toEqual([['bf16', [4, 6, 64]]]);
    expect(out('mxfp4_linear', [t([3, 64], 'bf16'), t([6, 2, 16], 'u8'), t([6, 2], 'u8'), null])).toEqual([['bf16', [3, 6]]]);
    fails('scaled_mm', [t([3, 4], 'fp8e4m3'), t([4, 5], 'fp8e4m3'), t([3, 1]), t([5, 1]), null], {}, /scale_b \[5, 1\] must be one element \(per-tensor\) or \[1, 5\] \(per-column\)/);
    fails('fp8_dequant', [t([3, 4], 'fp8e4m3'), t([3, 1])], { output_dtype: 'i32' }, /fp8_dequant: bad arguments: output_dtype/);
    fails('mxfp4_dequant', [t([4, 2, 16], 'u8'), t([4, 3], 'u8')], {}, /scales \[4, 3\] must be \[4, 2\]/);
  });

  it('recurrent ops: optional final states', () => {
    expect(out('causal_conv1d', [t([2, 8, 5]), t([8, 4]), null, null])).toEqual([['f32', [2, 8, 5]]]);
    expect(out('causal_conv1d', [t([2, 8, 5]), t([8, 4]), t([8]), t([2, 8, 3])], { return_final_states: true, activation: 'silu' })).toEqual([['f32', [2, 8, 5]], ['f32', [2, 8, 3]]]);
    expect(out('fused_recurrent_gla', [t([1, 6, 2, 16], 'bf16'), t([1, 6, 2, 16], 'bf16'), t([1, 6, 2, 8], 'bf16'), t([1, 6, 2, 16], 'bf16'), null], { output_final_state: true })).toEqual([
      ['bf16', [1, 6, 2, 8]],
      ['f32', [1, 2, 16, 8]],
    ]);
    expect(out('chunk_gla', [t([1, 6, 2, 16]), t([1, 6, 2, 16]), t([1, 6, 2, 8]), t([1, 6, 2, 16]), null], { chunk_size: 4 })).toEqual([['f32', [1, 6, 2, 8]]]);
    expect(out('fused_recurrent_gated_delta_rule', [t([1, 6, 2, 16]), t([1, 6, 2, 16]), t([1, 6, 4, 8]), t([1, 6, 4]), t([1, 6, 4]), t([1, 4, 16, 8])], { output_final_state: true })).toEqual([
      ['f32', [1, 6, 4, 8]],
      ['f32', [1, 4, 16, 8]],
    ]);
    expect(out('causal_conv1d_update', [t([2, 8], 'bf16'), t([2, 8, 3], 'bf16'), t([8, 4], 'bf16'), null], { activation: 'silu' })).toEqual([['bf16', [2, 8]], ['bf16', [2, 8, 3]]]);
    fails('causal_conv1d_update', [t([2, 8]), t([2, 8, 2]), t([8, 4]), null], {}, /conv_state length 2 must be at least width - 1 = 3/);
    fails('causal_conv1d', [t([2, 8, 5]), t([8, 4]), null, t([2, 8, 4])], {}, /initial_states has shape \[2, 8, 4\], expected \[2, 8, 3\]/);
    expect(out('fused_recurrent_kda', [t([1, 6, 2, 16]), t([1, 6, 2, 16]), t([1, 6, 2, 8]), t([1, 6, 2, 16]), t([1, 6, 2]), null])).toEqual([['f32', [1, 6, 2, 8]]]);
    fails('chunk_kda', [t([1, 6, 2, 16]), t([1, 6, 2, 16]), t([1, 6, 2, 8]), t([1, 6, 2]), t([1, 6, 2]), null], {}, /chunk_kda: g has shape \[1, 6, 2\], expected \[1, 6, 2, 16\]/);
    fails('fused_recurrent_gated_delta_rule', [t([1, 6, 2, 16]), t([1, 6, 2, 16]), t([1, 6, 3, 8]), t([1, 6, 3]), t([1, 6, 3]), null], {}, /value heads 3 .* must be a multiple of q\/k heads 2/);
  });
});
