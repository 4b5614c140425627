import type { DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { parseSignature } from '../../args.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import { withTuning } from '../../../test/spine-helpers.js';
import { chooseLinearPath, gemvSmLoad, gemvTriggerMode, gemvStreamGrid, gemvStreamGridBalanced, type LinearPath, type LinearShape } from './linear.js';
import type { Tuning } from '../../tuning/schema.js';
import { cudaTuning } from '../../tuning/load.js';

describe('chooseLinearPath (CPU): cuBLASLt vs the small-batch GEMV, per call', () => {
  const on = { ...cudaTuning().linear, gemvMaxRows: 8 };
  const base: LinearShape = { M: 1, N: 28672, K: 4096, dtype: 'bf16', aligned: true };

  // the defaults as shipped: skipped where the environment overrides them
  it.skipIf(process.env.FASTKERNELS_TUNING !== undefined)('by default (run 11: the bs-1 step is faster with it): fk_gemv_stream at M 1, cuBLASLt from M 2', () => {
    expect(cudaTuning().linear.gemvMaxRows).toBe(1);
    expect(chooseLinearPath({ ...base, M: 1 })).toBe('gemv-stream');
    for (const M of [0, 2, 4, 8, 9, 64]) expect(chooseLinearPath({ ...base, M })).toBe('cublaslt');
  });
  it('gemvMaxRows 1: the GEMV at M 1 only', () => {
    const one = { ...cudaTuning().linear, gemvMaxRows: 1 };
    expect(chooseLinearPath({ ...base, M: 1 }, one)).toBe('gemv-stream');
    for (const M of [0, 2, 4, 8]) expect(chooseLinearPath({ ...base, M }, one)).toBe('cublaslt');
  });

  const cases: [string, Partial<LinearShape>, Partial<Tuning['linear']>, LinearPath][] = [
    ...[1, 2, 3, 4, 5, 6, 7, 8].map((M) => [`M ${M}`, { M }, {}, 'gemv-stream'] as [string, Partial<LinearShape>, Partial<Tuning['linear']>, LinearPath]),
    ['M 9: above the switch', { M: 9 }, {}, 'cublaslt'],
    ['M 0', { M: 0 }, {}, 'cublaslt'],
    ['f16', { dtype: 'f16' }, {}, 'gemv-stream'],
    ['f32 K 4096 (128 = 32 vectors of 4 divide it)', { dtype: 'f32' }, {}, 'gemv-stream'],
    ['f32 (4 per vector, not 32 vectors)', { dtype: 'f32', K: 4100 }, {}, 'gemv'],
    ['bf16 K 72 (a multiple of 8, not of 256)', { K: 72 }, {}, 'gemv'],
    ['bf16 K 14336 (56 chunks of 256)', { K: 14336 }, {}, 'gemv-stream'],
    ['bf16 K 4096, gemvStream off', {}, { gemvStream: false }, 'gemv'],
    ['bf16 K 4100 (not a multiple of 8)', { K: 4100 }, {}, 'cublaslt'],
    ['f32 K 4102 (not a multiple of 4)', { dtype: 'f32', K: 4102 }, {}, 'cublaslt'],
    ['unaligned', { aligned: false }, {}, 'cublaslt'],
    ['f64: no kernel', { dtype: 'f64' as DType }, {}, 'cublaslt'],
    ['gemvMaxRows 4, M 4', { M: 4 }, { gemvMaxRows: 4 }, 'gemv-stream'],
    ['gemvMaxRows 4, M 5', { M: 5 }, { gemvMaxRows: 4 }, 'cublaslt'],
    ['gemvMaxRows 16 is capped at 8: M 9', { M: 9 }, { gemvMaxRows: 16 }, 'cublaslt'],
  ];
  for (const [name, patch, tuning, want] of cases) {
    it(`${name} -> ${want}`, () => {
      expect(chooseLinearPath({ ...base, ...patch }, { ...on, ...tuning })).toBe(want);
    });
  }

  it('reads the tuning in force by default (the GPU tests flip gemvMaxRows on it)', () => {
    withTuning('linear', { gemvMaxRows: 8 }, () => expect(chooseLinearPath({ ...base, M: 4 })).toBe('gemv-stream'));
    withTuning('linear', { gemvMaxRows: 1 }, () => expect(chooseLinearPath({ ...base, M: 4 })).toBe('cublaslt'));
  });

  it('fk_gemv and fk_gemv_stream are embedded with the launch signature launchGemv passes (y, x, w, bias, M, N, K, xs; the stream adds FK_NORM\'s res_in, res_out, norm_w, eps)', () => {
    const common = ['ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64'];
    expect(parseSignature(KERNEL_SOURCES['gemv.cu']!, 'fk_gemv')).toEqual(common);
    expect(parseSignature(KERNEL_SOURCES['gemv.cu']!, 'fk_gemv_stream')).toEqual([...common, 'ptr', 'ptr', 'ptr', 'f32']);
  });
});

describe('gemvStreamGrid: one wave, the warps\' shares of rows differ by one at most', () => {
  // [N, SMs, warps per SM, warps per block] -> blocks; the kernel deals rows w, w + W, ... (W = blocks * warps per block)
  const cases: [number, number, number, number, number][] = [
    [6144, 132, 32, 8, 384], // qkv: 4224 warps at most -> 2 rows each -> 3072 warps
    [4096, 132, 32, 8, 512], // o and down: one row each
    [28672, 132, 32, 8, 512], // gate_up: 7 rows each
    [128256, 132, 32, 8, 518], // lm_head: 31 rows each -> 4138 warps
    [1, 132, 32, 8, 1],
    [10007, 132, 32, 8, 417],
  ];
  for (const [N, sms, wps, wpb, want] of cases) {
    it(`N ${N}, ${sms} SMs x ${wps} warps, ${wpb} a block -> ${want} blocks`, () => {
      const blocks = gemvStreamGrid(N, sms, wps, wpb);
      const W = blocks * wpb;
      expect(W).toBeLessThanOrEqual(Math.max(wpb, sms * wps + wpb - 1)); // one wave (up to one partial block)
      const shares = new Set(Array.from({ length: Math.min(W, N) }, (_, w) => Math.floor((N - 1 - w) / W) + 1));
      expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1);
      expect(blocks).toBe(want);
    });
  }
});

describe('gemvStreamGridBalanced: the one-wave grid whose busiest SM streams the fewest rows', () => {
  it('gemvSmLoad: blocks round-robin on the SMs, rows w, w + W, ... per warp', () => {
    expect(gemvSmLoad(16, 2, 2, 4)).toBe(8); // 8 warps, 2 rows each: 4 warps a block, one block an SM
    expect(gemvSmLoad(10, 3, 2, 2)).toBe(6); // 6 warps: warps 0-3 have 2 rows, 4-5 one; SM 0 has blocks 0 and 2 (4 + 2)
    expect(gemvSmLoad(3, 4, 4, 2)).toBe(2); // more warps than rows: idle warps count nothing
  });
  // [rows, SMs, warps per SM, warps per block] -> [blocks, rows on the busiest SM]
  const cases: [string, number, number, number, number, number, number][] = [
    ['FK_GLU gate_up: 14336 pairs (448 blocks by gemvStreamGrid: 128 pairs an SM)', 14336, 132, 32, 8, 510, 112],
    ['qkv: as gemvStreamGrid', 6144, 132, 32, 8, 384, 48],
    ['o and down: as gemvStreamGrid', 4096, 132, 32, 8, 512, 32],
    ['gate_up: as gemvStreamGrid', 28672, 132, 32, 8, 512, 224],
    ['lm_head (518 blocks by gemvStreamGrid: 992 rows an SM)', 128256, 132, 32, 8, 526, 976],
    ['one row', 1, 132, 32, 8, 1, 1],
  ];
  for (const [name, N, sms, wps, wpb, blocks, load] of cases) {
    it(`${name} -> ${blocks} blocks, ${load} rows on the busiest SM`, () => {
      const got = gemvStreamGridBalanced(N, sms, wps, wpb);
      expect(got).toBe(blocks);
      expect(gemvSmLoad(N, got, sms, wpb)).toBe(load);
      expect(load).toBeLessThanOrEqual(gemvSmLoad(N, gemvStreamGrid(N, sms, wps, wpb), sms, wpb)); // never worse
      expect(got * wpb).toBeLessThanOrEqual(sms * wps); // one wave
    });
  }
});

describe('gemvTriggerMode (CPU): when each fk_gemv_stream build lets the next kernel in', () => {
  it.skipIf(process.env.FASTKERNELS_TUNING !== undefined)('all by default (run 15: the bs-1 step 4.360 -> 4.305 ms): every build', () => {
    expect(gemvTriggerMode(true)).toBe(1);
    expect(gemvTriggerMode(false)).toBe(1);
  });
  it('glu: the gate_up + silu build only; all: every build; off: none', () => {
    const glu = { ...cudaTuning().linear, gemvLateTrigger: 'glu' as const };
    const all = { ...cudaTuning().linear, gemvLateTrigger: 'all' as const };
    expect([gemvTriggerMode(true, glu), gemvTriggerMode(false, glu)]).toEqual([1, 0]);
    expect([gemvTriggerMode(true, all), gemvTriggerMode(false, all)]).toEqual([1, 1]);
    const off = { ...cudaTuning().linear, gemvLateTrigger: 'off' as const };
    expect([gemvTriggerMode(true, off), gemvTriggerMode(false, off)]).toEqual([0, 0]);
  });
  it('the kernel leaves out its early trigger exactly under FK_LATE_TRIGGER', () => {
    const src = KERNEL_SOURCES['gemv.cu']!;
    expect(src).toMatch(/fk_pdl_wait\(\);\n#if !FK_LATE_TRIGGER\n\s*fk_pdl_trigger\(\);\n#endif/);
    // no other trigger in fk_gemv_stream: the late builds let the next kernel in when their blocks exit
    const stream = src.slice(src.indexOf('fk_gemv_stream('));
    expect(stream.match(/fk_pdl_trigger\(\);/g)).toHaveLength(1);
  });
});
