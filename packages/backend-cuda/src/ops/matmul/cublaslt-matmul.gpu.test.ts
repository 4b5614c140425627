/**
 * The matmul group on cuBLASLt vs the float64 CPU backend through the op registry, bf16 / f16 / f32: bmm / matmul over
 * odd sizes, transposed views read by layout, broadcast batches (stride 0, folded, or copied expanded), padded rows;
 * baddbmm with C read in place, broadcast over the batch, a bias-epilogue row, a copied input, beta 0 over NaN; linear
 * with every activation (cuBLASLt's RELU / GELU epilogues, the generated silu / erf-gelu pass), with and without bias,
 * 1-D and strided inputs; einsum on the families' patterns and the general path (diagonals, sums, three operands).
 */
import { Tensor, type DType } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G } from '../../../test/spine-helpers.js';
import { checkOp, cpu, rand, type View } from '../../../test/ops-helpers.js';

/** The gpu tag, and time for cuBLASLt's first heuristics and NVRTC's first activation kernels. */
const GT = { ...G, timeout: 300_000 };
const DTYPES: DType[] = ['bf16', 'f16', 'f32'];
const T: View = (t) => t.transpose(-1, -2);
const T2: View = (t) => t.transpose(-1, -2).contiguous().transpose(-1, -2); // same values, column-major storage

describe('bmm / matmul vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: odd sizes, transposed operands, broadcast and folded batches, padded rows, 1-D operands`, GT, () => {
      let seed = 1;
      const mm = (label: string, op: 'bmm' | 'matmul', a: number[], b: number[], views: (View | undefined)[] = [], via: 'kernel' | 'any' = 'kernel') =>
        checkOp(`${dtype} ${op} ${label}`, { op, inputs: [rand(a, dtype, seed++), rand(b, dtype, seed++)], views, via });
      mm('[3, 33, 40] @ [3, 40, 17]', 'bmm', [3, 33, 40], [3, 40, 17]);
      mm('[2, 64, 128] @ [2, 64, 128]^T (attention scores, k^T a view)', 'bmm', [2, 64, 128], [2, 64, 128], [undefined, T]);
      mm('a^T a view, b column-major storage', 'bmm', [4, 24, 20], [4, 24, 36], [T, T2]);
      mm('a broadcast over the batch (stride 0)', 'bmm', [1, 16, 32], [5, 32, 24], [(t) => t.expand([5, 16, 32]), undefined]);
      mm('padded rows (ld > K)', 'bmm', [3, 16, 48], [3, 40, 8], [(t) => t.narrow(2, 4, 40), undefined]);
      mm('[2, 3, 9, 32] @ [32, 20] (folded into M)', 'matmul', [2, 3, 9, 32], [32, 20]);
      mm('[2, 3, 9, 32] @ [3, 32, 20] (copied expanded)', 'matmul', [2, 3, 9, 32], [3, 32, 20]);
      mm('[2, 1, 9, 32] @ [1, 3, 32, 20] (both broadcast)', 'matmul', [2, 1, 9, 32], [1, 3, 32, 20]);
      mm('[7, 1, 64] @ [64, 48] (M = 1 rows folded)', 'matmul', [7, 1, 64], [64, 48]);
      mm('[5, 40] @ [40] (1-D other)', 'matmul', [5, 40], [40], [], 'any');
      mm('[40] @ [2, 40, 6] (1-D input)', 'matmul', [40], [2, 40, 6], [], 'any');
      mm('every other column (copied)', 'matmul', [6, 64], [32, 10], [(t) => t.slice(1, 0, 64, 2), undefined]);
    });
  }
});

describe('baddbmm vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: C in place, broadcast inputs, the bias-epilogue row, beta 0 over NaN`, GT, () => {
      let seed = 100;
      const bad = (label: string, input: number[], attrs: { beta?: number; alpha?: number }, B = 3, M = 20, K = 48, N = 24, inputT?: Tensor, via: 'kernel' | 'decomposition' = 'kernel') =>
        checkOp(`${dtype} baddbmm ${label}`, {
          op: 'baddbmm',
          inputs: [inputT ?? rand(input, dtype, seed++), rand([B, M, K], dtype, seed++), rand([B, K, N], dtype, seed++)],
          attrs,
          via,
        });
      bad('full input, beta 0.5, alpha 2', [3, 20, 24], { beta: 0.5, alpha: 2 });
      bad('[1, M, N] input (batch stride 0)', [1, 20, 24], { beta: 1.5 });
      bad('[N] row, beta 1 (bias epilogue)', [24], {});
      bad('[1, 1, N] row, alpha -0.5 (bias epilogue)', [1, 1, 24], { alpha: -0.5 });
      bad('[N] row, beta 0.25 (copied into the output)', [24], { beta: 0.25 });
      bad('[M, 1] column (copied into the output)', [20, 1], { beta: 1 });
      bad('[1] scalar-like input', [1], { beta: 2 });
      const nan = Tensor.fromArray(cpu(), new Float64Array(3 * 20 * 24).fill(NaN), [3, 20, 24], dtype);
      bad('beta 0: a NaN input is not read', [3, 20, 24], { beta: 0, alpha: 0.5 }, 3, 20, 48, 24, nan);
      bad('K = 0 (the decomposition)', [3, 5, 6], { beta: 0.5 }, 3, 5, 0, 6, undefined, 'decomposition');
    });
  }
});

describe('linear vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: every activation, with and without bias, 3-D / 1-D / strided inputs`, GT, () => {
      let seed = 200;
      for (const activation of ['none', 'relu', 'gelu', 'gelu_tanh', 'silu'] as const) {
        for (const bias of [true, false]) {
          const lin = (label: string, x: number[], N: number, views: (View | undefined)[] = []) =>
            checkOp(`${dtype} linear ${activation} ${bias ? '+ bias' : ''} ${label}`, {
              op: 'linear',
              inputs: [rand(x, dtype, seed++), rand([N, x[x.length - 1]! - (views[0] ? 8 : 0)], dtype, seed++, { scale: 0.2 }), bias ? rand([N], dtype, seed++) : null],
              attrs: { activation },
              views,
            });
          lin('[2, 13, 96] -> 72', [2, 13, 96], 72);
          lin('[96] -> 40', [96], 40);
          lin('strided rows [9, 104] narrowed to 96', [9, 104], 56, [(t) => t.narrow(1, 8, 96)]);
        }
      }
    });
  }
});

describe('einsum vs the float64 CPU backend', () => {
  for (const dtype of DTYPES) {
    it(`${dtype}: MLA, attention, triangle, broadcast, chains, diagonals, sums`, GT, () => {
      let seed = 300;
      const es = (equation: string, shapes: number[][]) =>
        checkOp(`${dtype} einsum '${equation}'`, { op: 'einsum', inputs: shapes.map((s) => rand(s, dtype, seed++)), attrs: { equation } });
      es('bhd,hdk->bhk', [[6, 8, 64], [8, 64, 32]]); // MLA absorbed q_nope @ W_UK
      es('bhk,hdk->bhd', [[6, 8, 32], [8, 64, 32]]); // MLA absorbed o @ W_UV
      es('bhqd,bhkd->bhqk', [[2, 3, 16, 32], [2, 3, 24, 32]]);
      es('bikc,bjkc->bijc', [[2, 12, 10, 4], [2, 9, 10, 4]]); // OpenFold3 triangle multiplication (outgoing)
      es('bkic,bkjc->bijc', [[2, 10, 12, 4], [2, 10, 9, 4]]); // (incoming)
      es('bij,jk->bik', [[3, 7, 20], [20, 11]]);
      es('...ij,...jk->...ik', [[2, 1, 5, 16], [3, 16, 6]]);
      es('ij,jk,kl->il', [[5, 4], [4, 3], [3, 9]]); // short sums: the intermediate rounds to the dtype, as torch's does
      es('i,i->', [[33], [33]]);
      es('ii->i', [[9, 9]]);
      es('ijk->ik', [[4, 6, 5]]);
      es('ij,ij->i', [[7, 24], [7, 24]]);
      es('i,j->ij', [[5], [7]]);
    });
  }
});
