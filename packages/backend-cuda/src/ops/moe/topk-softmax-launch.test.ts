/**
 * What topk_softmax costs in launches on CUDA, on a fake device (test/ops-fake.ts: no GPU, each launch recorded and its
 * arguments packed as the runtime would): the kernel is one launch with no host read and no copy for a decode step and
 * a 4096-token prefill at Mixtral / Qwen3-MoE / gpt-oss widths (the grid from shapes alone: graph-capturable); the
 * op's decomposition (softmax, topk, sum, div, to: what L1/topk_softmax ran before) launches more on the same device.
 * Plus the plan (lanes a row, rows a CTA), the specialisation in the source, strided logits and the declines.
 */
import { callOp, opRoute, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fakeRegistered } from '../../../test/ops-fake.js';
import { TOPK_SOFTMAX_THREADS, planTopkSoftmax } from './topk-softmax-plan.js';

const MODELS = [
  { name: 'Mixtral', E: 8, k: 2, lanes: 8 },
  { name: 'Qwen3-30B-A3B', E: 128, k: 8, lanes: 32 },
  { name: 'gpt-oss-20b', E: 32, k: 4, lanes: 32 },
];

describe('topk_softmax on CUDA: launches (fake device)', () => {
  for (const m of MODELS) {
    for (const T of [1, 4096]) {
      it(`${m.name} (E ${m.E}, top-${m.k}) T ${T}: one launch of fk_moe_topk_softmax, outputs f32 / i32 [T, k], no copies`, () => {
        const f = fakeRegistered();
        const x = f.t([T, m.E], 'bf16');
        expect(opRoute('topk_softmax', [x], { k: m.k, renormalize: true })).toEqual({ via: 'kernel' });
        const outs = callOp('topk_softmax', [x], { k: m.k, renormalize: true });
        expect(outs.map((t: Tensor) => [t.dtype, t.shape])).toEqual([['f32', [T, m.k]], ['i32', [T, m.k]]]);
        expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_moe_topk_softmax']);
        expect(f.copies).toEqual([]);
        const l = f.cache.launches[0]!;
        const rows = TOPK_SOFTMAX_THREADS / m.lanes;
        expect([l.grid, l.block]).toEqual([Math.ceil(T / rows), TOPK_SOFTMAX_THREADS]);
        expect(l.source).toMatch(new RegExp(`^#define FK_T __nv_bfloat16\\n#define FK_E ${m.E}\\n#define FK_K ${m.k}\\n#define FK_LANES ${m.lanes}\\n`));
        expect(l.args.slice(0, 3)).toEqual([x, ...outs]);
        expect(l.args.slice(3)).toEqual([T, m.E, 1]);
      });
    }
  }

  it('f32 / f16 logits, renormalize off, a row stride past E read in place; strided experts copied contiguous first', () => {
    const f = fakeRegistered();
    callOp('topk_softmax', [f.t([5, 32], 'f32')], { k: 4 });
    expect(f.cache.launches[0]!.source).toMatch(/^#define FK_T float\n/);
    expect(f.cache.launches[0]!.args[5]).toBe(0);
    const wide = f.t([7, 48], 'f16').narrow(1, 0, 32); // rows 48 apart
    callOp('topk_softmax', [wide], { k: 4, renormalize: true });
    expect(f.cache.launches[1]!.source).toMatch(/^#define FK_T __half\n/);
    expect(f.cache.launches[1]!.args[0]).toBe(wide);
    expect(f.cache.launches[1]!.args[4]).toBe(48);
    expect(f.copies).toEqual([]);
    const transposed = f.t([32, 7], 'bf16').transpose(0, 1); // experts 7 apart
    callOp('topk_softmax', [transposed], { k: 2 });
    expect(f.copies).toHaveLength(1);
    expect(f.cache.launches[2]!.args[0]).toBe(f.copies[0]![0]);
    expect(f.cache.launches[2]!.args[4]).toBe(32);
  });

  it('no tokens: no launch', () => {
    const f = fakeRegistered();
    const outs = callOp('topk_softmax', [f.t([0, 128], 'bf16')], { k: 8 });
    expect(outs.map((t: Tensor) => t.shape)).toEqual([[0, 8], [0, 8]]);
    expect(f.cache.launches).toEqual([]);
  });

  it('declines f64 logits, E past 512 and k past 32 with the reason (the decomposition runs)', () => {
    const f = fakeRegistered();
    expect(opRoute('topk_softmax', [f.t([3, 8], 'f64')], { k: 2 })).toMatchObject({ via: 'decomposition' });
    expect(opRoute('topk_softmax', [f.t([3, 1024], 'bf16')], { k: 8 })).toMatchObject({ via: 'decomposition' });
    expect(opRoute('topk_softmax', [f.t([3, 64], 'bf16')], { k: 33 })).toMatchObject({ via: 'decomposition' });
    expect(planTopkSoftmax(3, 1024, 8)).toMatch(/1024 experts: past the kernel's 512/);
    expect(planTopkSoftmax(3, 64, 33)).toMatch(/top-33: past the kernel's 32/);
  });

  it('the plan: lanes cover E up to 32, rows a CTA, grid', () => {
    const lanes = (E: number) => (planTopkSoftmax(1, E, 1) as { lanes: number }).lanes;
    expect([1, 2, 3, 6, 8, 9, 20, 32, 33, 128, 512].map(lanes)).toEqual([1, 2, 4, 8, 8, 16, 32, 32, 32, 32, 32]);
    expect(planTopkSoftmax(4096, 8, 2)).toEqual({ lanes: 8, rowsPerCta: 16, grid: 256 });
    expect(planTopkSoftmax(7, 128, 8)).toEqual({ lanes: 32, rowsPerCta: 4, grid: 2 });
  });

  it('the decomposition (L1/topk_softmax before this kernel) launches more on the same device', () => {
    const f = fakeRegistered('topk_softmax');
    callOp('topk_softmax', [f.t([1, 128], 'bf16')], { k: 8, renormalize: true });
    const entries = f.cache.launches.map((l) => l.entry);
    expect(entries).not.toContain('fk_moe_topk_softmax');
    console.log(`topk_softmax decomposition: ${entries.length} launches + ${f.copies.length} copies: ${entries.join(' ')}`);
    expect(entries.length + f.copies.length).toBeGreaterThanOrEqual(5);
  });
});
