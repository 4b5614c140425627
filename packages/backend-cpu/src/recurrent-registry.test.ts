/** The recurrent group through the op registry on the cpu backend. */
import { describe, expect, it } from 'vitest';
import { F, inferOp, OpError, supportedOps, type OpCall, type Tensor } from '@fastkernels/core';
import { cpu, expectClose, randn, Rng, tensor, values } from './test-helpers.js';

const logSigmoid = (x: number) => -Math.log1p(Math.exp(-x));

describe('recurrent group via the registry', () => {
  it('every op runs as a cpu kernel; outputs follow the final-state flags', () => {
    for (const n of ['causal_conv1d', 'causal_conv1d_update', 'fused_recurrent_gla', 'chunk_gla', 'fused_recurrent_gated_delta_rule']) expect(supportedOps(cpu).find((s) => s.name === n)?.via).toBe('kernel');
    const x = tensor([1, 2, 3, 4], [1, 1, 4]);
    const w = tensor([1, 10, 100], [1, 3]);
    const one = F.causalConv1d(x, w);
    expect(one.length).toBe(1);
    expect(values(one[0]!)).toEqual([100, 210, 321, 432]);
    const [, fin] = F.causalConv1d(x, w, { return_final_states: true });
    expect(values(fin!)).toEqual([3, 4]);
    const [y, st] = F.causalConv1dUpdate(tensor([5], [1, 1]), fin!, w);
    expect(values(y)).toEqual([3 + 40 + 500]);
    expect(values(st)).toEqual([4, 5]);
  });

  it('chunk_gla: the kernel and its decomposition (the recurrent form) agree', () => {
    const rng = new Rng(1);
    const [B, T, H, K, V] = [1, 9, 2, 4, 3];
    const q = randn(rng, [B, T, H, K], 'f64');
    const k = randn(rng, [B, T, H, K], 'f64');
    const v = randn(rng, [B, T, H, V], 'f64');
    const g = tensor(Array.from(rng.fillNormal(B * T * H * K, 1), logSigmoid), [B, T, H, K], 'f64');
    const s0 = randn(rng, [B, H, K, V], 'f64');
    const [o, s] = F.chunkGla(q, k, v, g, { initial_state: s0, output_final_state: true, chunk_size: 4 });
    const { spec, attrs, outputs } = inferOp('chunk_gla', [q, k, v, g, s0], { output_final_state: true, chunk_size: 4 });
    const call: OpCall = { op: spec, backend: cpu, inputs: [q, k, v, g, s0], attrs: attrs as Record<string, unknown>, outputs };
    const [od, sd] = spec.decompose!(call) as Tensor[];
    expectClose(values(o!), values(od!), 1e-10, 1e-10);
    expectClose(values(s!), values(sd!), 1e-6, 1e-6);
    const [o2] = F.fusedRecurrentGla(q, k, v, g, { initial_state: s0 });
    expectClose(values(o2!), values(o!), 1e-10, 1e-10);
  });

  it('chunk_gated_delta_rule and chunk_kda run through their decompositions and equal the recurrent ops', () => {
    const rng = new Rng(3);
    const q = randn(rng, [1, 4, 2, 4], 'f64');
    const v = randn(rng, [1, 4, 2, 3], 'f64');
    const g = tensor(Array.from(rng.fillNormal(8, 1), logSigmoid), [1, 4, 2], 'f64');
    const gk = tensor(Array.from(rng.fillNormal(32, 1), logSigmoid), [1, 4, 2, 4], 'f64');
    const beta = tensor(Array.from(rng.fillNormal(8, 1), (x) => 1 / (1 + Math.exp(-x))), [1, 4, 2], 'f64');
    const ops = supportedOps(cpu);
    expect(ops.find((s) => s.name === 'chunk_gated_delta_rule')?.via).toBe('decomposition');
    expect(ops.find((s) => s.name === 'chunk_kda')?.via).toBe('decomposition');
    expect(ops.find((s) => s.name === 'fused_recurrent_kda')?.via).toBe('kernel');
    const opts = { output_final_state: true, use_qk_l2norm_in_kernel: true };
    const [a, sa] = F.chunkGatedDeltaRule(q, q, v, g, beta, opts);
    const [b, sb] = F.fusedRecurrentGatedDeltaRule(q, q, v, g, beta, opts);
    expect(values(a!)).toEqual(values(b!));
    expect(values(sa!)).toEqual(values(sb!));
    const [c] = F.chunkKda(q, q, v, gk, beta);
    const [d] = F.fusedRecurrentKda(q, q, v, gk, beta);
    expect(values(c!)).toEqual(values(d!));
  });

  it('gated delta rule through F; errors are OpErrors', () => {
    const rng = new Rng(2);
    const q = randn(rng, [1, 3, 2, 4], 'bf16');
    const v = randn(rng, [1, 3, 4, 5], 'bf16');
    const g = randn(rng, [1, 3, 4], 'bf16');
    const [o, s] = F.fusedRecurrentGatedDeltaRule(q, q, v, g, g, { output_final_state: true, use_qk_l2norm_in_kernel: true });
    expect(o!.shape).toEqual([1, 3, 4, 5]);
    expect(o!.dtype).toBe('bf16');
    expect(s!.shape).toEqual([1, 4, 4, 5]);
    expect(s!.dtype).toBe('f32');
    expect(() => F.fusedRecurrentGatedDeltaRule(q, q, randn(rng, [1, 3, 3, 5], 'bf16'), g, g)).toThrow(OpError);
    expect(() => F.chunkGla(q, q, v, q)).toThrow(/chunk_gla: v \[1, 3, 4, 5\] must be \[1, 3, 2, V\]/);
    expect(() => F.causalConv1d(randn(rng, [1, 2, 5]), randn(rng, [3, 4]))).toThrow(/causal_conv1d: weight \[3, 4\] must be \[2, width >= 1\]/);
  });
});
