/**
 * scaled_dot_product_attention's route to the flash prefill kernel, its host side run on the CPU backend: the per-batch
 * strided [rows, heads, D] views, the one-sequence cu_seqlens written by fills, the scale, GQA and the copy of each
 * [L, H, D] result into the output's [H, L, D] give what SDPA itself gives (the float64 CPU op), for permuted inputs,
 * several batch dims and L != S; calls the kernel does not take are declined with the reason. The kernel itself is
 * checked on the GPU host (attention-dense.gpu.test.ts runs both routes).
 */
import { F, type OpCall, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { expectClose, randCpu, tolOf } from '../../../test/spine-helpers.js';
import { GenKernelCache } from '../gen-cache.js';
import { DenseSdpa, type DenseSdpaAttrs } from './dense-sdpa.js';
import { sdpaViaPrefillDecline } from './plan.js';

function call(q: Tensor, k: Tensor, v: Tensor, attrs: Partial<DenseSdpaAttrs> = {}, mask: Tensor | null = null): OpCall<DenseSdpaAttrs> {
  const a: DenseSdpaAttrs = { dropout_p: 0, is_causal: false, scale: null, enable_gqa: true, ...attrs };
  const shape = [...q.shape.slice(0, -1), v.shape[v.rank - 1]!];
  return { op: {} as OpCall['op'], backend: q.backend, inputs: [q, k, v, mask], attrs: a, outputs: [{ shape, dtype: q.dtype }] } as unknown as OpCall<DenseSdpaAttrs>;
}

describe('SDPA on the flash prefill kernel: the host side (CPU backend)', () => {
  const cases: { name: string; q: number[]; kv: number[]; causal?: boolean; scale?: number; permute?: boolean; dtype?: 'bf16' | 'f16' }[] = [
    { name: 'non-causal, L != S, two batch entries', q: [2, 4, 24, 64], kv: [2, 4, 40, 64] },
    { name: 'causal L = S, GQA 8 : 2, an explicit scale', q: [1, 8, 33, 64], kv: [1, 2, 33, 64], causal: true, scale: 0.3 },
    { name: 'two batch dims, head dim 128, f16', q: [2, 3, 2, 17, 128], kv: [2, 3, 2, 21, 128], dtype: 'f16' },
    { name: '[B, L, H, D] permuted to [B, H, L, D] (read in place)', q: [2, 19, 4, 64], kv: [2, 26, 4, 64], permute: true },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const dtype = c.dtype ?? 'bf16';
      let [q, k, v] = [randCpu(c.q, dtype, 1), randCpu(c.kv, dtype, 2), randCpu(c.kv, dtype, 3)];
      if (c.permute) [q, k, v] = [q, k, v].map((t) => t.permute(0, 2, 1, 3)) as [Tensor, Tensor, Tensor];
      const sdpa = new DenseSdpa(new GenKernelCache());
      const cl = call(q, k, v, { is_causal: !!c.causal, scale: c.scale ?? null });
      expect(sdpa.prefillDecline(cl)).toBeNull();
      const got = sdpa.run(cl);
      expect(sdpa.lastPath).toBe('prefill');
      const want = F.scaledDotProductAttention(q, k, v, { is_causal: !!c.causal, scale: c.scale ?? null, enable_gqa: true });
      expect(got.shape).toEqual(want.shape);
      expectClose(got, want, tolOf(dtype), c.name);
      for (const t of [q, k, v, got, want]) t.dispose();
    });
  }
  it('declines, with the reason, what the prefill kernel does not take (the dense kernel runs those)', () => {
    const base = { dtype: 'bf16', D: 128, Dv: 128, L: 64, S: 64, causal: false, masked: false, dropout: 0, sameBatch: true, gqa: true };
    expect(sdpaViaPrefillDecline(base)).toBeNull();
    expect(sdpaViaPrefillDecline({ ...base, dtype: 'f32' })).toMatch(/dtype f32/);
    expect(sdpaViaPrefillDecline({ ...base, D: 96, Dv: 96 })).toMatch(/head dims 96/);
    expect(sdpaViaPrefillDecline({ ...base, Dv: 64 })).toMatch(/one head dim/);
    expect(sdpaViaPrefillDecline({ ...base, masked: true })).toMatch(/mask/);
    expect(sdpaViaPrefillDecline({ ...base, causal: true, S: 80 })).toMatch(/top-left/);
    expect(sdpaViaPrefillDecline({ ...base, S: 0 })).toMatch(/no keys/);
    expect(sdpaViaPrefillDecline({ ...base, sameBatch: false })).toMatch(/batch dims/);
    const [q, k, v] = [randCpu([1, 2, 8, 64], 'bf16', 1), randCpu([1, 2, 8, 64], 'bf16', 2), randCpu([1, 2, 8, 64], 'bf16', 3)];
    const sdpa = new DenseSdpa(new GenKernelCache());
    expect(sdpa.prefillDecline(call(q, k, v, {}, randCpu([8, 8], 'bf16', 4)))).toMatch(/mask/);
    sdpa.viaPrefill = false;
    expect(sdpa.prefillDecline(call(q, k, v))).toMatch(/viaPrefill is off/);
  });
});
