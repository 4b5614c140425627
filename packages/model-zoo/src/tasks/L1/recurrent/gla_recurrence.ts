import { F, Module, Tensor } from '@fastkernels/core';
import { defineL1OpTask } from '../../define-op-task.js';
import { GLA_2_7B_HEADS, GLA_OUTPUTS, caseScale, glaForward, glaRecurrenceReference, glaWork, makeGlaInputs } from './gla-common.js';

/**
 * FLA's naive_recurrent_gla (fla.ops.gla.naive), the definition the fused kernels are tested against, written as it
 * is there: in float32, one time step at a time out of elementwise ops and a reduction (h = h * exp(gk_t) + k_t^T v_t,
 * o_t = sum_K(q_t * scale * h)), no recurrent kernel. forward(q, k, v, gk, initial_state?) -> [o, final_state].
 */
export class NaiveRecurrentGLA extends Module {
  constructor(readonly scale: number | null = null) {
    super();
  }

  forward(q: Tensor, k: Tensor, v: Tensor, gk: Tensor, initialState: Tensor | null = null): Tensor[] {
    const [B, T, H, K] = q.shape as [number, number, number, number];
    const V = v.shape[3]!;
    const scale = this.scale ?? 1 / Math.sqrt(K);
    // F.to always copies: these are ours, and so is h (the caller's state is never updated)
    const [qf, kf, vf, gf] = [q, k, v, gk].map((t) => F.to(t, 'f32')) as [Tensor, Tensor, Tensor, Tensor];
    let h = initialState ? F.to(initialState, 'f32') : Tensor.zeros(this.ctx.backend, [B, H, K, V], 'f32', { device: this.ctx.device });
    const outs: Tensor[] = [];
    try {
      for (let t = 0; t < T; t++) {
        const step: Tensor[] = [];
        const s = (x: Tensor) => (step.push(x), x);
        const at = (x: Tensor) => s(x.select(1, t)); // [B, H, K | V]
        const decay = s(s(F.exp(at(gf))).unsqueeze(-1));
        const kv = s(F.mul(s(at(kf).unsqueeze(-1)), s(at(vf).unsqueeze(-2))));
        const next = F.add(s(F.mul(h, decay)), kv);
        h.dispose();
        h = next;
        const qs = s(s(F.mul(at(qf), scale)).unsqueeze(-1));
        outs.push(F.sum(s(F.mul(qs, h)), { dim: -2 }));
        for (const x of step) x.dispose();
      }
      const o32 = F.stack(outs, 1);
      const o = F.to(o32, q.dtype);
      o32.dispose();
      return [o, h];
    } catch (e) {
      h.dispose();
      throw e;
    } finally {
      for (const x of [qf, kf, vf, gf, ...outs]) x.dispose();
    }
  }
}

const { H, K, V } = GLA_2_7B_HEADS;

export const glaRecurrenceTask = defineL1OpTask('fused_recurrent_gla', {
  id: 'L1/gla_recurrence',
  className: 'NaiveRecurrentGLA',
  mirrors: 'fla.ops.gla.naive.naive_recurrent_gla',
  description: 'The naive recurrent form of gated linear attention (FLA naive_recurrent_gla): float32, one step at a time from elementwise ops; the definition the chunked and fused forms equal.',
  architectures: ['gla', 'retnet'],
  baseline: NaiveRecurrentGLA,
  init: [{ name: 'scale', type: 'float', optional: true, default: null, doc: 'null: K^-0.5' }],
  forward: glaForward('gk'),
  params: {},
  outputs: GLA_OUTPUTS,
  attrs: (c) => ({ scale: caseScale(c), output_final_state: true }),
  cases: {
    ci: [
      { name: 'small-state', dtype: 'f32', dims: { B: 2, T: 6, H: 2, K: 8, V: 4 }, init: [], options: { initial_state: true, gateNormalizer: 4 } },
      { name: 'small-bf16', dtype: 'bf16', dims: { B: 1, T: 5, H: 3, K: 4, V: 8 }, init: [0.5], options: { gateNormalizer: 2 } },
    ],
    production: [
      { name: 'gla-2.7b-decode-b1', dtype: 'bf16', dims: { B: 1, T: 1, H, K, V }, init: [], options: { initial_state: true } },
      { name: 'gla-2.7b-decode-b64', dtype: 'bf16', dims: { B: 64, T: 1, H, K, V }, init: [], options: { initial_state: true } },
      { name: 'gla-2.7b-prompt-64', dtype: 'bf16', dims: { B: 1, T: 64, H, K, V }, init: [] },
    ],
  },
  makeInputs: makeGlaInputs,
  reference: ([q, k, v, g, s0], _p, c) => glaRecurrenceReference(q!, k!, v!, g!, s0 ?? null, caseScale(c)),
  work: glaWork,
});
