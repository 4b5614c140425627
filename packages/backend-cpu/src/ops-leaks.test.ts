/** Every decomposition and copy route of the elementwise / reduction / layout / norm groups frees what it allocates. */
import { Tensor, callOp, inferOp, type OpArg } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from './backend.js';

const cpu = new CpuBackend();
const t = (shape: number[], dtype: 'f32' | 'bf16' | 'i64' | 'bool' = 'f32', fill = (i: number) => Math.sin(i)) =>
  Tensor.fromArray(cpu, Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => fill(i)), shape, dtype);

/** A transposed view that holds the only reference to its storage. */
function transposed(x: Tensor): Tensor {
  const v = x.transpose(0, 1);
  x.dispose();
  return v;
}

/** Run the decomposition (or the call itself) and dispose everything; the live storage count must not grow. */
function leakFree(name: string, make: () => OpArg[], attrs: Record<string, unknown>, route: 'decompose' | 'call'): void {
  const before = cpu.memoryStats().liveStorages;
  const inputs = make();
  let outs: Tensor[];
  if (route === 'call') outs = callOp(name, inputs, attrs);
  else {
    const info = inferOp(name, inputs, attrs);
    outs = [...info.spec.decompose!({ op: info.spec, backend: cpu, inputs: info.inputs as OpArg[], attrs: info.attrs as Record<string, unknown>, outputs: info.outputs })];
  }
  for (const o of outs) o.dispose();
  for (const i of inputs) if (i instanceof Tensor) i.dispose();
  expect(cpu.memoryStats().liveStorages, name).toBe(before);
}

describe('no leaks', () => {
  it('decompositions', () => {
    const chain = { steps: [{ op: 'mul', args: [{ input: 0 }, { input: 1 }] }, { op: 'gelu', args: [{ step: 0 }] }, { op: 'to', args: [{ step: 1 }], attrs: { dtype: 'f32' } }] };
    leakFree('elementwise_chain', () => [t([3, 4], 'bf16'), t([4], 'bf16')], chain, 'decompose');
    leakFree('silu_and_mul', () => [t([3, 8], 'bf16')], {}, 'decompose');
    leakFree('layer_norm', () => [t([3, 8], 'bf16'), t([8]), t([8])], { normalized_shape: [8] }, 'decompose');
    leakFree('group_norm', () => [t([2, 4, 3]), t([4]), t([4])], { num_groups: 2 }, 'decompose');
    leakFree('batch_norm', () => [t([2, 4, 3]), t([4]), t([4], 'f32', () => 1), t([4]), t([4])], {}, 'decompose');
    leakFree('rms_norm', () => [t([3, 8], 'bf16'), t([8], 'bf16'), t([3, 8], 'bf16')], { group_size: 4, norm_before_gate: true }, 'decompose');
    leakFree('fused_add_rms_norm', () => [t([3, 8]), t([3, 8]), t([8])], { weight_offset: 1 }, 'decompose');
    leakFree('normalize', () => [t([3, 8])], { p: 3 }, 'decompose');
    leakFree('l2_norm', () => [t([3, 8])], {}, 'decompose');
    leakFree('var', () => [t([3, 8], 'bf16')], { dim: 1 }, 'decompose');
    leakFree('std', () => [t([3, 8])], { dim: 1 }, 'decompose');
    leakFree('logsumexp', () => [t([3, 8])], { dim: [0, 1] }, 'decompose');
    leakFree('log_softmax', () => [t([3, 8], 'bf16')], { dim: 1 }, 'decompose');
    leakFree('max', () => [t([3, 8])], { dim: 1 }, 'decompose');
    leakFree('stack', () => [t([3]), t([3])], { dim: 1 }, 'decompose');
    leakFree('pixel_shuffle', () => [t([1, 8, 2, 3])], { upscale_factor: 2 }, 'decompose');
    leakFree('pixel_unshuffle', () => [t([1, 2, 4, 6])], { downscale_factor: 2 }, 'decompose');
    leakFree('embedding', () => [t([2, 3], 'i64', (i) => i % 4), t([4, 5])], {}, 'decompose');
    leakFree('embedding_masked', () => [t([2, 3], 'i64', (i) => i), t([3, 5])], { start: 2 }, 'decompose');
    leakFree('reshape', () => [transposed(t([4, 6]))], { shape: [24] }, 'decompose');
    leakFree('roll', () => [t([4, 6])], { shifts: [1, -2], dims: [0, 1] }, 'decompose');
    leakFree('roll', () => [t([4, 6])], { shifts: 6, dims: 1 }, 'decompose');
    leakFree('roll', () => [t([4, 6])], { shifts: 5 }, 'decompose');
    leakFree('masked_fill', () => [t([2, 3], 'bf16'), t([3], 'bool', (i) => i % 2), 2.5], {}, 'decompose');
  });

  it('copy routes and kernels', () => {
    leakFree('cat', () => [t([2, 3]), t([1, 3], 'bf16'), t([0])], { dim: 0 }, 'call');
    leakFree('repeat', () => [t([2, 3])], { repeats: [2, 1, 2] }, 'call');
    leakFree('contiguous', () => [transposed(t([2, 3]))], {}, 'call');
    leakFree('split', () => [t([7, 3])], { split_size_or_sections: 3 }, 'call');
    leakFree('topk', () => [t([7, 3])], { k: 2, dim: 0 }, 'call');
    leakFree('interpolate', () => [t([1, 2, 3, 3])], { scale_factor: 2, mode: 'bilinear' }, 'call');
    const pad = (info: ReturnType<typeof inferOp>, x: Tensor) => info.spec.viaOps!(cpu.ops, { op: info.spec, backend: cpu, inputs: [x], attrs: info.attrs as Record<string, unknown>, outputs: info.outputs })!;
    const before = cpu.memoryStats().liveStorages;
    const x = t([3, 4]);
    for (const p of [[1, -2], [-5, 1], [2, 2, 1, 1]]) for (const o of pad(inferOp('pad', [x], { pad: p }), x)) o.dispose();
    x.dispose();
    expect(cpu.memoryStats().liveStorages).toBe(before);
  });
});
