/**
 * mxfp4_dequant on the GPU (mxfp4-source.ts) against the CPU op: every byte value and a spread of scales (255: NaN)
 * decoded to f32, bf16 and f16; the values are exact in float (fp4 times a power of two), so the outputs must match
 * bit for bit after the one rounding. Also a non-contiguous blocks view (the launcher copies it) and gpt-oss-20b's
 * gate_up expert shape for one expert.
 */
import { describe, expect, it } from 'vitest';
import { Rng, Tensor, callOp1, opRoute, type DType } from '@fastkernels/core';
import { G, cpu, releasing, toGpu } from '../../../test/spine-helpers.js';

function bytes(n: number, seed: number, lo = 0, hi = 256): number[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => rng.int(lo, hi));
}

function same(got: Tensor, want: Tensor, label: string): void {
  const a = got.toFloat64Array();
  const e = want.toFloat64Array();
  expect(a.length, label).toBe(e.length);
  const bad: string[] = [];
  for (let i = 0; i < a.length && bad.length < 8; i++) if (!Object.is(a[i], e[i]) && !(Number.isNaN(a[i]!) && Number.isNaN(e[i]!))) bad.push(`[${i}] ${a[i]} vs ${e[i]}`);
  expect(bad, `${label}: ${bad.join(', ')}`).toEqual([]);
}

function check(lead: number[], G_: number, dtype: DType, seed: number, strided = false): void {
  releasing((keep) => {
    const nb = lead.reduce((p, d) => p * d, 1) * G_;
    // scales around 127 (values near 1), plus the extremes and NaN's 255
    const sc = bytes(nb, seed + 1, 110, 140).map((s, i) => (i % 97 === 5 ? 255 : i % 89 === 7 ? 0 : i % 83 === 9 ? 254 : s));
    const blocksCpu = keep(Tensor.fromArray(cpu(), bytes(nb * 16 * (strided ? 2 : 1), seed), strided ? [...lead, G_, 32] : [...lead, G_, 16], 'u8'));
    const scalesCpu = keep(Tensor.fromArray(cpu(), sc, [...lead, G_], 'u8'));
    const b = strided ? keep(blocksCpu.narrow(blocksCpu.rank - 1, 8, 16)) : blocksCpu;
    const want = keep(callOp1('mxfp4_dequant', [b, scalesCpu], { dtype }));
    const gBlocks = keep(toGpu(blocksCpu));
    const gb = strided ? keep(gBlocks.narrow(gBlocks.rank - 1, 8, 16)) : gBlocks;
    const gs = keep(toGpu(scalesCpu));
    expect(opRoute('mxfp4_dequant', [gb, gs], { dtype })).toEqual({ via: 'kernel' });
    const got = keep(callOp1('mxfp4_dequant', [gb, gs], { dtype }));
    same(got, want, `mxfp4_dequant ${lead} x ${G_} to ${dtype}${strided ? ' (strided blocks)' : ''}`);
  });
}

describe('mxfp4_dequant on CUDA = the CPU op, bit for bit', () => {
  for (const dtype of ['f32', 'bf16', 'f16'] as DType[]) {
    it(`to ${dtype}: [3, 5] rows x 7 blocks, a strided view, one gpt-oss-20b gate_up expert`, G, () => {
      check([3, 5], 7, dtype, 1);
      check([4], 3, dtype, 2, true);
      check([1, 5760], 90, dtype, 3);
    });
  }
});
