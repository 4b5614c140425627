/**
 * FlashInfer's trtllm MoE entry points (L2 trtllm_bf16_moe, trtllm_mxfp4_moe) against their float64 references through
 * the composite contract, plus a check that the routing method is honoured: Renormalize and Default differ, each
 * matching its own reference.
 */
import { Rng, toHostArray, withContext, type Module, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { describeCompositeContract } from '../../../test/composite-harness.js';
import { baselineRegistry } from '../../index.js';
import { topkSoftmaxReference } from '../../tasks/L1/moe/topk_softmax.js';
import { fusedExpertsReference } from './L2/fused_experts.js';
import { trtllmBf16MoeTask } from './L2/trtllm_bf16_moe.js';
import { trtllmMxfp4MoeTask } from './L2/trtllm_mxfp4_moe.js';
import { initMoeParameters } from './moe/fused-moe.js';

for (const t of [trtllmBf16MoeTask, trtllmMxfp4MoeTask]) describeCompositeContract(t, cpuBackend);

describe('TrtLlmBf16MoE', () => {
  it('the routing method matters: Renormalize (softmax over the top k) and Default (top k of the softmax) differ, each = its reference', () => {
    const registry = baselineRegistry();
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry };
    const outs: Float64Array[] = [];
    for (const method of ['renormalize', 'default'] as const) {
      const m = registry.createIn<Module & { forward(x: Tensor, l: Tensor): Tensor }>(ctx, 'L2/trtllm_bf16_moe', 8, 3, 32, 24, method);
      expect(m.namedParameters().map(([k]) => k)).toEqual(['w13_weight', 'w2_weight']);
      const rng = new Rng(11);
      initMoeParameters(m, rng);
      const c = { ...trtllmBf16MoeTask.cases.ci[0]!, dims: { T: 4, H: 32, I: 24, E: 8, K: 3 } };
      const [x, logits] = withContext(ctx, () => trtllmBf16MoeTask.makeInputs(c, ctx, rng)) as [Tensor, Tensor];
      const got = m.forward(x, logits).toFloat64Array();
      const params = new Map(m.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
      const [w, ids] = topkSoftmaxReference(toHostArray(logits), 3, method === 'renormalize');
      const ref = fusedExpertsReference(toHostArray(x), params.get('w13_weight')!, params.get('w2_weight')!, w, ids).data;
      got.forEach((v, i) => expect(Math.abs(v - ref[i]!)).toBeLessThan(1e-4 * (1 + Math.abs(ref[i]!))));
      outs.push(got);
      m.dispose();
    }
    expect(outs[0]!.reduce((a, v, i) => Math.max(a, Math.abs(v - outs[1]![i]!)), 0)).toBeGreaterThan(1e-3);
  });
});
