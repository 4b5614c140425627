/**
 * Kimi-Linear on the engine (CPU, f32): a hybrid stack — the MLA layer's latent rows in the paged cache (one tensor),
 * the three KDA layers' q / k / v conv states and KDA state in the state pool (four states per layer, one slot per
 * sequence). Continuous batching equals each sequence generated alone (and the float64 forward for some): batched with
 * prompts of different lengths, with chunked prefill (a continuing chunk reads its states from the pool and its keys
 * from the cache), mixed prefill + decode steps, recompute preemption, (emulated) graph decode whose padding rows touch
 * no slot, and aborts; every slot and block is free again afterwards. Through e2e (candidates for L2/kimi_moe and
 * L1/fused_recurrent_kda are used and dropped) and capture (the KDA / MLA / step tasks with the options their cases read).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CaptureIndexSchema, Rng, casesFromCaptures, compareTensors, toHostArray, toleranceFor, withContext, type ExecutionContext, type Module, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { describeHybridEngineEquivalence, expectE2eDrops, expectE2eSelfTestAgrees, hybridEngineHarness } from '../../../test/hybrid-engine-harness.js';
import { captureWorkload } from '../../engine/capture.js';
import { FusedRecurrentKDA } from '../../tasks/L1/recurrent/fused_recurrent_kda.js';
import { baselineRegistry } from '../../index.js';
import { KimiMoE } from './L2/kimi_moe.js';
import { initKimiParameters } from './kimi-linear-cases.js';
import { kimiLinearArchitecture } from './kimi-linear-model.js';
import { refKimiLinearGreedy } from './kimi-linear-reference.js';

const h = hybridEngineHarness({ fixture: 'tiny-kimi-linear', architecture: kimiLinearArchitecture, initParameters: initKimiParameters, float64Greedy: refKimiLinearGreedy });
const { cfg, ctx, engine } = h;

describe('Kimi-Linear on the engine: MLA latent rows in the paged cache, q/k/v conv + KDA states in the pool', () => {
  it('sizes both: a KV cache for the one MLA layer, a state pool with four states per KDA layer', () => {
    const lines: string[] = [];
    const e = engine({ log: (l) => lines.push(l) });
    try {
      const layers = e.stateCache!.layers;
      expect(layers[2]).toBeUndefined();
      const kda = [[8, 16, 3], [8, 16, 3], [8, 16, 3], [8, 2, 8, 8]];
      expect([0, 1, 3].map((l) => layers[l]!.states.map((s) => s.shape))).toEqual([kda, kda, kda]);
      expect(e.kvCache.layers.filter(Boolean)).toHaveLength(1);
      // the MLA layer's cache is one latent tensor [blocks, 16, 1, kv_lora_rank + rope dims], no K/V pair
      const mla = e.kvCache.layers[2]!;
      expect(Object.keys(mla)).toEqual(['latentCache']);
      expect('latentCache' in mla && mla.latentCache.shape).toEqual([e.budget.numKvBlocks, 16, 1, cfg.kvLoraRank + cfg.qkRopeHeadDim]);
      expect(e.budget.kvBlockBytes).toBe(16 * (cfg.kvLoraRank + cfg.qkRopeHeadDim) * 4); // one f32 tensor, one layer
      expect(e.budget.numStateSlots).toBe(8);
      expect(e.budget.stateSlotBytes).toBe(3 * (3 * 16 * 3 + 2 * 8 * 8) * 4);
      expect(lines.join('\n')).toMatch(/recurrent state .*: 8 slots/);
    } finally {
      e.dispose();
    }
  });

  describeHybridEngineEquivalence(h);
});

describe('Kimi-Linear through e2e and capture', () => {
  it('e2e self-test agrees 100%; a candidate MoE that drops the shared experts and a KDA decode that forgets the state are each found and dropped', () => {
    expectE2eSelfTestAgrees(h);
    class NoSharedExperts extends KimiMoE {
      override forward(hiddenStates: Tensor): Tensor {
        const logits = this.gateLogits(hiddenStates);
        try {
          return this.experts.forward(hiddenStates, logits, this.eScoreCorrectionBias);
        } finally {
          logits.dispose();
        }
      }
    }
    expectE2eDrops(h, { taskId: 'L2/kimi_moe', cls: NoSharedExperts });
    // the KDA layers build their delta rule through the registry: a candidate decode that forgets the state is used, found and dropped
    class StatelessDecode extends FusedRecurrentKDA {
      override forward(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initialState: Tensor | null = null, cuSeqlens: Tensor | null = null, ssmStateIndices: Tensor | null = null): Tensor[] {
        if (!ssmStateIndices) return super.forward(q, k, v, g, beta, null, cuSeqlens);
        // rows of a scratch pool of zeros: every decode forgets its sequence's context
        const scratch = initialState!.clone().fill_(0);
        try {
          return super.forward(q, k, v, g, beta, scratch, cuSeqlens, ssmStateIndices);
        } finally {
          scratch.dispose();
        }
      }
    }
    expectE2eDrops(h, { taskId: 'L1/fused_recurrent_kda', cls: StatelessDecode });
  });

  it('capture records the KDA, MLA and MoE tasks the engine calls, with the options their cases read; the captured cases build inputs and match the float64 references', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'fk-kimi-linear-capture-'));
    try {
      const { path } = captureWorkload({ baseline: baselineRegistry(), workload: h.workload, outDir: tmp, model: 'tiny-kimi-linear', engine: h.captureEngine, load: h.load });
      const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
      const ids = ['L1/chunk_kda', 'L1/fused_recurrent_kda', 'L1/causal_conv1d', 'L1/rms_norm_gated', 'L2/kimi_delta_attention', 'L2/kimi_mla_attention', 'L2/kimi_moe', 'L3/kimi_linear_decoder', 'L4/kimi_linear'];
      expect(Object.keys(index.tasks)).toEqual(expect.arrayContaining(ids));
      // decodes: one-token rows from the pool's states; prefills: one sequence each (16-token steps), over the pool
      expect(index.tasks['L1/fused_recurrent_kda']!.forward.every((f) => f.dims.T === 1 && f.dims.K === cfg.kdaHeadDim && f.options?.initial_state === true)).toBe(true);
      expect(index.tasks['L1/chunk_kda']!.forward.every((f) => f.dims.B === 1 && f.dims.T! <= 16 && f.options?.initial_state === true)).toBe(true);
      expect(index.tasks['L2/kimi_delta_attention']!.forward.every((f) => f.options?.initial_state === true)).toBe(true);
      for (const id of ['L2/kimi_mla_attention', 'L3/kimi_linear_decoder', 'L4/kimi_linear']) {
        expect(index.tasks[id]!.forward.some((f) => (f.options?.decodeCtxLens as number[]).length > 0), id).toBe(true);
        expect(index.tasks[id]!.forward.some((f) => (f.options?.prefillLens as number[]).length > 0), id).toBe(true);
      }
      expect(index.tasks['L3/kimi_linear_decoder']!.forward.every((f) => typeof f.options?.residual === 'boolean')).toBe(true);
      // the absorbed decode's attention: one latent kv head of kv_lora_rank + rope, the values its first kv_lora_rank dims
      expect(index.tasks['L1/paged_decode_attention']!.init).toContainEqual([cfg.numAttentionHeads, cfg.kvLoraRank + cfg.qkRopeHeadDim, 1 / Math.sqrt(cfg.qHeadDim), 1, 0, cfg.kvLoraRank]);
      const baseline = baselineRegistry();
      const cctx: ExecutionContext = { ...ctx, registry: baseline };
      for (const id of ['L1/paged_decode_attention', 'L1/chunk_kda', 'L1/fused_recurrent_kda', 'L2/kimi_delta_attention', 'L2/kimi_mla_attention', 'L2/kimi_moe', 'L3/kimi_linear_decoder', 'L4/kimi_linear']) {
        const task = baseline.task(id)!;
        const cases = casesFromCaptures(task, [{ index, resolve: (f) => join(tmp, f), path }], 2);
        expect(cases.length, id).toBeGreaterThan(0);
        for (const c of cases) {
          const rng = new Rng(5);
          const m = baseline.createIn<Module & { forward(...a: (Tensor | null)[]): Tensor | Tensor[] }>(cctx, id, ...c.init);
          task.initParameters?.(m, c, rng);
          withContext(cctx, () => {
            const inputs = task.makeInputs(c, cctx, rng);
            expect(inputs.length, `${id} ${c.name}`).toBeLessThanOrEqual(task.inputs.length); // the L1 delta rules leave the pooled form's inputs out
            const res = m.forward(...inputs);
            const got = Array.isArray(res) ? res : [res];
            const params = new Map(m.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
            const ref = task.reference(inputs.map((t) => (t ? toHostArray(t) : null)), params, c);
            got.forEach((g, i) => expect(compareTensors(g, ref[i]!, toleranceFor(task, 'f32')).status, `${id} ${c.name} output ${i}`).toBe('PASSED'));
            for (const t of [...inputs, ...got]) t?.dispose();
          });
          m.dispose();
        }
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
