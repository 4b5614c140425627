/**
 * The MoE tasks of the family (L2 fused_experts, mixtral_moe, qwen3_moe) against their float64 references through
 * the composite contract, plus checks that would catch a wrong routing convention: renormalisation on or off changes
 * the Qwen3 block's output, and the expert weights sit in the tree under vLLM's names.
 */
import { Rng, toHostArray, withContext, type Module, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { describeCompositeContract } from '../../../test/composite-harness.js';
import { baselineRegistry } from '../../index.js';
import { fusedExpertsReference, fusedExpertsTask, makeExpertsInputs, moeBlockSizeFor, type FusedExperts } from './L2/fused_experts.js';
import { mixtralMoeTask } from './L2/mixtral_moe.js';
import { qwen3MoeTask } from './L2/qwen3_moe.js';
import { initMoeParameters } from './moe/fused-moe.js';
import type { MoeAlign } from '../../tasks/L1/moe/moe_align.js';
import { denseMoeBlock } from './moe/reference.js';

for (const t of [fusedExpertsTask, mixtralMoeTask, qwen3MoeTask]) describeCompositeContract(t, cpuBackend);

describe('MoE blocks', () => {
  it('MixtralMoE names its parameters as vLLM does (gate.weight, experts.w13_weight [E, 2I, H], experts.w2_weight [E, H, I])', () => {
    const registry = baselineRegistry();
    const m = registry.createIn<Module>({ backend: cpuBackend(), device: 0, dtype: 'f32', registry }, 'L2/mixtral_moe', 8, 2, 32, 48);
    expect(m.namedParameters().map(([k, p]) => [k, [...p.shape]])).toEqual([
      ['gate.weight', [8, 32]],
      ['experts.w13_weight', [8, 96, 32]],
      ['experts.w2_weight', [8, 32, 48]],
    ]);
    m.dispose();
  });

  it("fused_experts picks moe_align's block by the rows an expert gets (16 / 64 / 128, vLLM's tuned BLOCK_SIZE_M), each matching the float64 MoE", () => {
    expect([1, 64, 65, 256, 257, 4096].map((T) => moeBlockSizeFor(T, 2, 8))).toEqual([16, 16, 64, 64, 128, 128]); // Mixtral
    expect([256, 257, 1024, 1025].map((T) => moeBlockSizeFor(T, 8, 128))).toEqual([16, 64, 64, 128]); // Qwen3-30B-A3B
    const registry = baselineRegistry();
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry };
    const [E, K, H, I] = [4, 2, 16, 24];
    const m = registry.createIn<FusedExperts>(ctx, 'L2/fused_experts', E, K, 'silu');
    // built without a fixed block size: one moe_align a size; record which one each call runs
    const ran: number[] = [];
    for (const [name, child] of m.namedModules()) {
      if (!name.startsWith('align')) continue;
      const align = child as MoeAlign;
      const forward = align.forward.bind(align);
      align.forward = (ids: Tensor) => (ran.push(align.blockSize), forward(ids));
    }
    expect(m.namedModules().map(([k]) => k).filter((k) => k.startsWith('align'))).toEqual(['align', 'align_bs64', 'align_bs128']);
    for (const T of [5, 40, 150]) { // 2.5, 20 and 75 rows an expert: blocks of 16, 64, 128
      const rng = new Rng(T);
      const ins = withContext(ctx, () => makeExpertsInputs({ dims: { T, H, I, E, K }, dtype: 'f32' }, ctx, rng));
      const y = m.forward(...(ins as [Tensor, Tensor, Tensor, Tensor, Tensor]));
      const ref = fusedExpertsReference(...(ins.map((t) => toHostArray(t)) as [never, never, never, never, never]));
      const got = y.toFloat64Array();
      got.forEach((v, i) => expect(Math.abs(v - ref.data[i]!)).toBeLessThan(1e-4 * (1 + Math.abs(ref.data[i]!))));
      for (const t of [y, ...ins]) t.dispose();
    }
    expect(ran).toEqual([16, 64, 128]);
    m.dispose();
  });

  it('norm_topk_prob matters: the Qwen3 block with and without it differ, each matching its own reference', () => {
    const registry = baselineRegistry();
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry };
    const outs: Float64Array[] = [];
    for (const norm of [true, false]) {
      const m = registry.createIn<Module & { forward(x: Tensor): Tensor }>(ctx, 'L2/qwen3_moe', 32, 16, 4, 24, norm);
      const rng = new Rng(5);
      initMoeParameters(m, rng);
      const x = withContext(ctx, () => qwen3MoeTask.makeInputs({ ...qwen3MoeTask.cases.ci[0]!, dims: { T: 4, H: 32 } }, ctx, rng)[0]!);
      const y = m.forward(x);
      const params = new Map(m.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
      const ref = denseMoeBlock(x.toFloat64Array(), 4, params, '', 4, norm);
      const got = y.toFloat64Array();
      got.forEach((v, i) => expect(Math.abs(v - ref[i]!)).toBeLessThan(1e-4 * (1 + Math.abs(ref[i]!))));
      outs.push(got);
      m.dispose();
    }
    const diff = outs[0]!.reduce((a, v, i) => Math.max(a, Math.abs(v - outs[1]![i]!)), 0);
    expect(diff).toBeGreaterThan(1e-3);
  });
});
