import type { DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { parseSignature } from '../args.js';
import { KERNEL_SOURCES } from '../kernel-sources.generated.js';
import { LINEAR_TUNING, chooseLinearPath, type LinearShape } from './linear.js';

describe('chooseLinearPath (CPU): cuBLASLt vs the small-batch GEMV, per call', () => {
  const on = { ...LINEAR_TUNING, gemvMaxRows: 8 };
  const base: LinearShape = { M: 1, N: 28672, K: 4096, dtype: 'bf16', aligned: true };

  it('off by default (run 10: cuBLASLt is faster in the bs-1 step): cuBLASLt at every M', () => {
    expect(LINEAR_TUNING.gemvMaxRows).toBe(0);
    for (const M of [0, 1, 4, 8, 9, 64]) expect(chooseLinearPath({ ...base, M })).toBe('cublaslt');
  });
  it('gemvMaxRows 1: the GEMV at M 1 only', () => {
    const one = { ...LINEAR_TUNING, gemvMaxRows: 1 };
    expect(chooseLinearPath({ ...base, M: 1 }, one)).toBe('gemv');
    for (const M of [0, 2, 4, 8]) expect(chooseLinearPath({ ...base, M }, one)).toBe('cublaslt');
  });

  const cases: [string, Partial<LinearShape>, Partial<typeof LINEAR_TUNING>, 'cublaslt' | 'gemv'][] = [
    ...[1, 2, 3, 4, 5, 6, 7, 8].map((M) => [`M ${M}`, { M }, {}, 'gemv'] as [string, Partial<LinearShape>, Partial<typeof LINEAR_TUNING>, 'gemv']),
    ['M 9: above the switch', { M: 9 }, {}, 'cublaslt'],
    ['M 0', { M: 0 }, {}, 'cublaslt'],
    ['f16', { dtype: 'f16' }, {}, 'gemv'],
    ['f32 (4 per vector)', { dtype: 'f32', K: 4100 }, {}, 'gemv'],
    ['bf16 K 72 (a multiple of 8)', { K: 72 }, {}, 'gemv'],
    ['bf16 K 4100 (not a multiple of 8)', { K: 4100 }, {}, 'cublaslt'],
    ['f32 K 4102 (not a multiple of 4)', { dtype: 'f32', K: 4102 }, {}, 'cublaslt'],
    ['unaligned', { aligned: false }, {}, 'cublaslt'],
    ['f64: no kernel', { dtype: 'f64' as DType }, {}, 'cublaslt'],
    ['gemvMaxRows 4, M 4', { M: 4 }, { gemvMaxRows: 4 }, 'gemv'],
    ['gemvMaxRows 4, M 5', { M: 5 }, { gemvMaxRows: 4 }, 'cublaslt'],
    ['gemvMaxRows 16 is capped at 8: M 9', { M: 9 }, { gemvMaxRows: 16 }, 'cublaslt'],
  ];
  for (const [name, patch, tuning, want] of cases) {
    it(`${name} -> ${want}`, () => {
      expect(chooseLinearPath({ ...base, ...patch }, { ...on, ...tuning })).toBe(want);
    });
  }

  it('reads LINEAR_TUNING by default (the GPU tests flip gemvMaxRows on it)', () => {
    const was = LINEAR_TUNING.gemvMaxRows;
    try {
      LINEAR_TUNING.gemvMaxRows = 8;
      expect(chooseLinearPath({ ...base, M: 4 })).toBe('gemv');
    } finally {
      LINEAR_TUNING.gemvMaxRows = was;
    }
    expect(chooseLinearPath({ ...base, M: 4 })).toBe('cublaslt');
  });

  it('fk_gemv is embedded and its launch signature is inferred (y, x, w, bias, M, N, K, xs)', () => {
    expect(parseSignature(KERNEL_SOURCES['gemv.cu']!, 'fk_gemv')).toEqual(['ptr', 'ptr', 'ptr', 'ptr', 'i32', 'i32', 'i32', 'i64']);
  });
});
