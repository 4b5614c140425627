/**
 * Qwen3-Next on the engine (CPU, f32): a hybrid stack — the gated-attention layer's K/V in the paged cache, the three
 * DeltaNet layers' conv and delta-rule states in the state pool (two states per layer, one slot per sequence). Continuous
 * batching equals each sequence generated alone (and the float64 forward for some): batched with prompts of different
 * lengths, with chunked prefill (a continuing chunk reads its states from the pool and its keys from the cache), mixed
 * prefill + decode steps, recompute preemption, (emulated) graph decode whose padding rows touch no slot, and aborts;
 * every slot and block is free again afterwards.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CaptureIndexSchema, type Tensor } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { describeHybridEngineEquivalence, expectE2eDrops, expectE2eSelfTestAgrees, hybridEngineHarness } from '../../../test/hybrid-engine-harness.js';
import { captureWorkload } from '../../engine/capture.js';
import { FusedRecurrentGatedDeltaRule } from '../../tasks/L1/recurrent/fused_recurrent_gated_delta_rule.js';
import { baselineRegistry } from '../../index.js';
import { initQwen3NextParameters } from './qwen3-next-cases.js';
import { qwen3NextArchitecture } from './qwen3-next-model.js';
import { refQwen3NextGreedy } from './qwen3-next-reference.js';

const h = hybridEngineHarness({ fixture: 'tiny-qwen3-next', architecture: qwen3NextArchitecture, initParameters: initQwen3NextParameters, float64Greedy: refQwen3NextGreedy });
const { cfg, engine } = h;

describe('Qwen3-Next on the engine: paged K/V for gated attention, conv + delta-rule states in the pool', () => {
  it('sizes both: a KV cache for the one attention layer, a state pool with two states per DeltaNet layer', () => {
    const lines: string[] = [];
    const e = engine({ log: (l) => lines.push(l) });
    try {
      const layers = e.stateCache!.layers;
      expect(layers[3]).toBeUndefined();
      expect(layers.slice(0, 3).map((l) => l!.states.map((s) => s.shape))).toEqual([0, 1, 2].map(() => [[8, cfg.convDim, 3], [8, 4, 8, 8]]));
      expect(e.kvCache.layers.filter(Boolean)).toHaveLength(1);
      expect(e.budget.numStateSlots).toBe(8);
      expect(e.budget.stateSlotBytes).toBe(3 * (cfg.convDim * 3 + 4 * 8 * 8) * 4);
      expect(lines.join('\n')).toMatch(/recurrent state .*: 8 slots/);
    } finally {
      e.dispose();
    }
  });

  describeHybridEngineEquivalence(h);
});

describe('Qwen3-Next through e2e and capture', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'fk-qwen3-next-engine-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('e2e self-test agrees 100%; a candidate whose recurrent decode drops the state is found and dropped', () => {
    expectE2eSelfTestAgrees(h);
    class StatelessDecode extends FusedRecurrentGatedDeltaRule {
      override forward(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initialState: Tensor | null = null): Tensor[] {
        return super.forward(q, k, v, g, beta, initialState ? null : initialState); // forgets every sequence's context
      }
    }
    expectE2eDrops(h, { taskId: 'L1/fused_recurrent_gated_delta_rule', cls: StatelessDecode });
  });

  it('capture records the DeltaNet and attention tasks the engine calls, with the options their cases read', () => {
    const { path } = captureWorkload({ baseline: baselineRegistry(), workload: h.workload, outDir: tmp, model: 'tiny-qwen3-next', engine: h.captureEngine, load: h.load });
    const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
    const ids = ['L1/chunk_gated_delta_rule', 'L1/fused_recurrent_gated_delta_rule', 'L1/causal_conv1d', 'L1/gemma_rms_norm', 'L1/rms_norm_gated', 'L2/qwen3_next_gdn_attention', 'L2/qwen3_next_attention', 'L2/shared_expert_moe', 'L3/qwen3_next_decoder', 'L4/qwen3_next'];
    expect(Object.keys(index.tasks)).toEqual(expect.arrayContaining(ids));
    // decodes: one-token rows over the state pool; prefills: the step's prefill chunks packed (B = 1, cu_seqlens), always
    // over the pool (the runner zeroes a new sequence's rows), so every case carries a state
    expect(index.tasks['L1/fused_recurrent_gated_delta_rule']!.forward.every((f) => f.dims.T === 1 && f.options?.initial_state === true)).toBe(true);
    expect(index.tasks['L1/chunk_gated_delta_rule']!.forward.every((f) => f.dims.B === 1 && f.dims.T! <= 16 && f.options?.initial_state === true)).toBe(true);
    expect(index.tasks['L1/chunk_gated_delta_rule']!.forward.some((f) => f.dims.N! > 1)).toBe(true);
    expect(index.tasks['L1/causal_conv1d']!.forward.some((f) => f.dims.L === 1 && f.dims.B! > 1)).toBe(true);
    expect(index.tasks['L3/qwen3_next_decoder']!.forward.some((f) => (f.options?.decodeCtxLens as number[]).length > 0)).toBe(true);
  });
});
