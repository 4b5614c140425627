/**
 * The GLA tasks against each other and the definition: the reference on hand-computed values; chunk_gla at every chunk
 * size the tasks and model use equals the recurrence (fused and naive) on fresh random inputs, state in and out; a
 * prefill split in two with the state carried equals the whole.
 */
import { F, Rng, hostArray, toHostArray, withContext, type ExecutionContext, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { baselineRegistry } from '../../../index.js';
import { ChunkGLA } from './chunk_gla.js';
import { FusedRecurrentGLA } from './fused_recurrent_gla.js';
import { glaRecurrenceReference, makeGlaInputs } from './gla-common.js';
import { NaiveRecurrentGLA } from './gla_recurrence.js';

const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype: 'f32', registry: baselineRegistry() };
const run = <T>(f: () => T): T => withContext(ctx, f);
const close = (a: Tensor, b: Tensor | Float64Array, tol: number) => {
  const x = toHostArray(a).data;
  const y = b instanceof Float64Array ? b : toHostArray(b).data;
  expect(x.length).toBe(y.length);
  let worst = 0;
  x.forEach((v, i) => (worst = Math.max(worst, Math.abs(v - y[i]!) / (1 + Math.abs(y[i]!)))));
  expect(worst).toBeLessThan(tol);
};

function inputs(seed: number, dims: { B: number; T: number; H: number; K: number; V: number }, state: boolean, dtype: 'f32' | 'bf16' = 'f32') {
  return run(() => makeGlaInputs({ name: 't', dtype, dims, init: [], options: { initial_state: state, gateNormalizer: 2 }, count: 1 }, ctx, new Rng(seed)) as [Tensor, Tensor, Tensor, Tensor, Tensor | null]);
}

describe('GLA recurrence reference', () => {
  it('matches a hand computation (B = H = K = V = 1, two steps)', () => {
    // S1 = e^{g1} s0 + k1 v1; S2 = e^{g2} S1 + k2 v2; o_t = scale q_t S_t
    const [g1, g2] = [Math.log(0.5), Math.log(0.25)];
    const q = hostArray([1, 2, 1, 1], [2, 3]);
    const k = hostArray([1, 2, 1, 1], [1, -1]);
    const v = hostArray([1, 2, 1, 1], [4, 2]);
    const g = hostArray([1, 2, 1, 1], [g1, g2]);
    const [o, s] = glaRecurrenceReference(q, k, v, g, hostArray([1, 1, 1, 1], [8]), 0.5);
    const S1 = 0.5 * 8 + 4;
    const S2 = 0.25 * S1 - 2;
    expect([...o.data]).toEqual([0.5 * 2 * S1, 0.5 * 3 * S2].map((x) => expect.closeTo(x, 12)) as never);
    expect(s.data[0]).toBeCloseTo(S2, 12);
  });
});

describe('chunk_gla equals the recurrent definition', () => {
  const dims = { B: 2, T: 70, H: 2, K: 8, V: 6 };
  for (const chunk of [1, 3, 16, 64, 70, 128]) {
    it(`chunk_size ${chunk}: o and the final state equal fused_recurrent_gla, naive_recurrent_gla and the float64 reference`, () => {
      const [q, k, v, g, s0] = inputs(chunk, dims, true);
      const [oc, sc] = run(() => new ChunkGLA(null, chunk).forward(q, k, v, g, s0));
      const [of, sf] = run(() => new FusedRecurrentGLA().forward(q, k, v, g, s0));
      const [on, sn] = run(() => new NaiveRecurrentGLA().forward(q, k, v, g, s0));
      const [ro, rs] = glaRecurrenceReference(...([q, k, v, g, s0!].map(toHostArray) as [never, never, never, never, never]), null);
      for (const [o, s] of [[oc, sc], [of, sf], [on, sn]] as const) {
        close(o!, ro.data, 1e-5);
        close(s!, rs.data, 1e-5);
      }
      close(oc!, of!, 1e-5);
      for (const t of [q, k, v, g, s0, oc, sc, of, sf, on, sn]) t?.dispose();
    });
  }

  it('a prefill in two chunks with the state carried equals one prefill (chunked then recurrent)', () => {
    const [q, k, v, g] = inputs(5, { B: 1, T: 41, H: 3, K: 4, V: 5 }, false);
    const cut = (t: Tensor, a: number, n: number) => run(() => F.contiguous(t.narrow(1, a, n)));
    const [whole, sWhole] = run(() => new ChunkGLA(null, 16).forward(q, k, v, g));
    const part = (a: number, n: number) => [q, k, v, g].map((t) => cut(t, a, n)) as [Tensor, Tensor, Tensor, Tensor];
    const [o1, s1] = run(() => new ChunkGLA(null, 16).forward(...part(0, 29)));
    const [o2, s2] = run(() => new FusedRecurrentGLA().forward(...part(29, 12), s1));
    const joined = run(() => F.cat([o1!, o2!], 1));
    close(joined, whole!, 1e-5);
    close(s2!, sWhole!, 1e-5);
  });

  it('bf16 inputs: the chunked form stays within bf16 rounding of the recurrent one', () => {
    const bctx = { ...ctx, dtype: 'bf16' as const };
    const [q, k, v, g, s0] = inputs(9, { B: 1, T: 50, H: 2, K: 16, V: 8 }, true, 'bf16');
    const [oc] = withContext(bctx, () => new ChunkGLA(null, 16).forward(q, k, v, g, s0));
    const [of] = withContext(bctx, () => new FusedRecurrentGLA().forward(q, k, v, g, s0));
    close(oc!, of!, 1e-2);
  });
});
