/**
 * Kimi-Linear's KDA ops on CUDA (fk_kda_recurrent / fk_kda_chunk: gdn-source.ts with the decay per key channel) vs the
 * float64 CPU backend through the op registry (CUDA must take its kernel): fused_recurrent_kda and chunk_kda with batch
 * rows and states, grouped value heads, the in-kernel l2norm on and off, every dtype (f32 gates under bf16), a g whose
 * tokens and heads are strided (channels contiguous); packed sequences (one empty) over a state pool with -1 padding
 * (pool rows compared after, untouched ones bit for bit), i32 and i64 indices; decode batches 1 / 7 / 64 at
 * Kimi-Linear-48B's KDA heads (32 heads, K = V = 128, each live row its own slot: test/gla-cases.ts); a chunked prefill
 * (a 1061-token sequence in two chunks carried through the pool, 1024 tokens in one call); and a decode step captured in a CUDA graph, replayed for other
 * pool rows.
 *
 * The GPU host runs this under a time limit and the float64 CPU op is the slow half: the production-shape cases take the
 * fewest heads that keep the plan (gdn-plan.ts) of the full shape.
 */
import { callOp, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { releasing, toGpu } from '../../../test/spine-helpers.js';
import { rand } from '../../../test/ops-helpers.js';
import { GLA_DECODE_BATCHES, glaDecodeSlots } from '../../../test/gla-cases.js';
import { GRAPH_DECODE_ROWS, GT, checkDecodeGraph, checkDeltaRule, deltaGate, sms, type DeltaRuleCase } from '../../../test/recurrent-gpu.js';
import { planGdn, type GdnShape } from './gdn-plan.js';

/** Kimi-Linear-48B-A3B's KDA heads: 32 heads (q / k / v alike), K = V = 128. */
const KL = { H: 32, HV: 32, K: 128, V: 128 } as const;

type KdaCase = Omit<DeltaRuleCase, 'op'> & { readonly op?: 'fused_recurrent_kda' | 'chunk_kda' };
const checkKda = (label: string, c: KdaCase) => checkDeltaRule(label, { ...c, op: c.op ?? 'fused_recurrent_kda' });

function samePlan(full: GdnShape, cut: GdnShape, kind: 'recurrent' | 'chunk'): void {
  const tile = (s: GdnShape) => ({ ...planGdn(s, 4, sms(), kind, 'channel'), grid: null });
  expect(tile(cut), `${JSON.stringify(cut)} plans as ${JSON.stringify(full)}`).toEqual(tile(full));
}

describe('KDA kernels (fused_recurrent_kda, chunk_kda) vs the float64 CPU backend', () => {
  it('batch rows across chunk ends, grouped value heads, states in and out, l2norm on and off, a strided g, every dtype', GT, () => {
    for (const op of ['fused_recurrent_kda', 'chunk_kda'] as const) {
      for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
        checkKda(`${op} ${dtype} B 2 T 37 H 2 HV 4 K 16 V 12`, { op, dtype, B: 2, T: 37, H: 2, HV: 4, K: 16, V: 12, init: true });
        checkKda(`${op} ${dtype} B 3 T 20 K 40 V 10 scale 0.3, prenormed q / k, strided g, no state`, { op, dtype, B: 3, T: 20, H: 1, HV: 3, K: 40, V: 10, scale: 0.3, l2norm: false, final: false, permuteG: true });
      }
      checkKda(`${op} bf16 with f32 gates`, { op, dtype: 'bf16', gDType: 'f32', B: 2, T: 19, H: 2, HV: 2, K: 32, V: 32, init: true });
    }
  });

  it('packed sequences (one empty) over a pool with -1 padding, i32 and i64 indices, both ops', GT, () => {
    for (const idxDType of ['i32', 'i64'] as DType[]) {
      for (const op of ['fused_recurrent_kda', 'chunk_kda'] as const) {
        checkKda(`${op} varlen ${idxDType}`, { op, dtype: 'bf16', B: 1, T: 90, H: 2, HV: 4, K: 32, V: 48, cu: [0, 17, 17, 70, 90], cuDType: idxDType, idx: [5, 0, -1, 2], slots: 6, idxDType });
      }
    }
  });

  it('Kimi-Linear-48B decode at batch 1, 7 and 64 over a pool (a -1 row in each batch past 1, distinct slots)', GT, () => {
    for (const D of GLA_DECODE_BATCHES) {
      // bs 64 on 4 heads: the full shape's tile over an 8x smaller pool for the CPU to fill and hold
      const heads = D === 64 ? { H: 4, HV: 4, K: KL.K, V: KL.V } : KL;
      samePlan({ N: D, HV: KL.HV, K: KL.K, V: KL.V }, { N: D, HV: heads.HV, K: KL.K, V: KL.V }, 'recurrent');
      checkKda(`decode bs ${D}`, { dtype: 'bf16', gDType: 'f32', B: D, T: 1, ...heads, ...glaDecodeSlots(D) });
    }
  });

  it('a chunked prefill at Kimi-Linear-48B heads: a 1061-token sequence in two chunks carried through the pool (beside a short one); 1024 tokens in one call', GT, () => {
    releasing((keep) => {
      const [H, K, V] = [2, KL.K, KL.V];
      samePlan({ N: 1, HV: KL.HV, K, V }, { N: 1, HV: H, K, V }, 'chunk');
      const base = keep(rand([3, H, K, V], 'f32', 6, { scale: 0.5 }));
      const pool = { cpu: base, gpu: keep(toGpu(base)) };
      // two chunks of one sequence (slot 1) beside a short one (slot 0); the chunked op on both backends over the same pool
      checkKda('prefill chunk 1', { op: 'chunk_kda', dtype: 'bf16', gDType: 'f32', B: 1, T: 600, H, HV: H, K, V, cu: [0, 37, 600], idx: [0, 1], pool, seed: 10 });
      checkKda('prefill chunk 2', { op: 'chunk_kda', dtype: 'bf16', gDType: 'f32', B: 1, T: 461, H, HV: H, K, V, cu: [0, 461], idx: [1], pool, seed: 20 });
      checkKda('prefill 1024 tokens, batch rows with states', { op: 'chunk_kda', dtype: 'bf16', gDType: 'f32', B: 1, T: 1024, H, HV: H, K, V, init: true, seed: 30 });
    });
  });

  it('a KDA decode step captured in a CUDA graph updates the pool rows the index tensor names at each replay', GT, () => {
    releasing((keep) => {
      const D = GRAPH_DECODE_ROWS;
      const slots = 8;
      const [H, K, V] = [2, KL.K, KL.V];
      const cpuIn = [rand([D, 1, H, K], 'bf16', 1), rand([D, 1, H, K], 'bf16', 2), rand([D, 1, H, V], 'bf16', 3), deltaGate([D, 1, H, K], 'f32', 4, 'g'), deltaGate([D, 1, H], 'bf16', 5, 'beta')].map(keep);
      const pool = keep(rand([slots, H, K, V], 'f32', 6, { scale: 0.5 }));
      const gIn = cpuIn.map((t) => keep(toGpu(t)));
      const gPool = keep(toGpu(pool));
      const attrs = { use_qk_l2norm_in_kernel: true };
      checkDecodeGraph(keep, (i) => [callOp('fused_recurrent_kda', [...gIn, gPool, null, i], attrs)[0]!], (i) => [callOp('fused_recurrent_kda', [...cpuIn, pool, null, i], attrs)[0]!], ['o'], [[gPool, pool, 'pool']]);
    });
  });
});
