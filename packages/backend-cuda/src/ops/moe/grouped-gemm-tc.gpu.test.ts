/**
 * The tensor-core grouped GEMM (grouped-gemm-tc.ts: routing kernel + kernels/grouped_gemm_tc.cu) on the GPU, the path
 * grouped_gemm and mxfp4_grouped_gemm take past GROUPED_GEMM_EAGER_ROWS rows at bf16 / f16, fresh random inputs each:
 * - reduced gpt-oss-20b-like shapes (E 32, top-4 rows token-major, experts hit unevenly and some never; offsets with
 *   padding rows; K and N tails, odd N) against the float64 CPU op, MXFP4 and bf16 / f16 weights as [E, N, K] rows and
 *   as the transposed view of HF's [E, K, N] (gpt-oss's dense experts; odd N declines there), each tile size (the
 *   planner's choice by rows an expert: 16, 64 and 128 an expert on average);
 * - gpt-oss-20b's gate_up at its real shape (E 32, K 2880, N 5760, MXFP4, bias) at 512 and 4096 routed rows: equal bit
 *   for bit to mxfp4_dequant + grouped_gemm on dense bf16 weights, [E, N, K] rows and HF's [E, K, N] view alike (the
 *   same tile, k order and bf16 weights), and close to one cuBLAS linear per expert (the decomposition's GEMMs) within
 *   bf16 rounding;
 * - a CUDA graph capture of the call: its replays equal eager calls bit for bit, over two routings.
 */
import { describe, expect, it } from 'vitest';
import { Rng, Tensor, callOp1, opRoute, type DType } from '@fastkernels/core';
import { groupedGemmRouting } from '../../../test/moe-routing.js';
import { G, cpu, expectClose, gpu, intsCpu, randCpu, releasing, toGpu, tolOf } from '../../../test/spine-helpers.js';

type Keep = <T extends Tensor | readonly Tensor[]>(t: T) => T;

/**
 * gpt-oss-like expert ids: `tokens` tokens with top-k distinct experts each, token-major (row r is token r / topK);
 * expert popularity skewed (weight 1 / (1 + rank)^1.2 over a shuffled order), the first `empty` experts never chosen.
 */
function skewedIds(rng: Rng, tokens: number, E: number, topK: number, empty: number): number[] {
  const order = Array.from({ length: E - empty }, (_, i) => i + empty);
  for (let i = order.length - 1; i > 0; i--) {
    const j = rng.int(0, i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const weight = order.map((_, rank) => 1 / (1 + rank) ** 1.2);
  const ids: number[] = [];
  for (let t = 0; t < tokens; t++) {
    const taken = new Set<number>();
    while (taken.size < topK) {
      let u = rng.uniform() * weight.reduce((a, b) => a + b, 0);
      let i = 0;
      while (i < order.length - 1 && (u -= weight[i]!) > 0) i++;
      if (!taken.has(order[i]!)) taken.add(order[i]!);
    }
    ids.push(...taken);
  }
  return ids;
}

/** Random MXFP4 experts [E, N, K / 32, 16] + scales around 1 / sqrt(K) on the CPU backend. */
function mxfp4Cpu(keep: Keep, rng: Rng, E: number, N: number, K: number): [Tensor, Tensor] {
  const G_ = K / 32;
  const words = new Uint32Array((E * N * G_ * 16) / 4).map(() => Math.floor(rng.uniform() * 2 ** 32)); // 4 random bytes a draw
  const blocks = keep(Tensor.fromArray(cpu(), new Uint8Array(words.buffer), [E, N, G_, 16], 'u8'));
  const center = 127 - Math.round(Math.log2(Math.sqrt(K)) + 1.5);
  const scales = keep(Tensor.fromArray(cpu(), Uint8Array.from({ length: E * N * G_ }, () => center + rng.int(-1, 2)), [E, N, G_], 'u8'));
  return [blocks, scales];
}

function expectBitEqual(a: Tensor, b: Tensor, label: string): void {
  const [x, y] = [a.toFloat64Array(), b.toFloat64Array()];
  expect(x.length, label).toBe(y.length);
  let diff = 0;
  let first = -1;
  for (let i = 0; i < x.length; i++) {
    if (Object.is(x[i], y[i]) || (Number.isNaN(x[i]!) && Number.isNaN(y[i]!))) continue;
    if (first < 0) first = i;
    diff++;
  }
  expect(diff, `${label}: ${diff} elements differ, first [${first}] ${x[first]} vs ${y[first]}`).toBe(0);
}

interface TcCase {
  readonly name: string;
  readonly tokens: number;
  readonly topK: number;
  readonly E: number;
  readonly N: number;
  readonly K: number;
  readonly routing: 'ids' | 'offsets';
  readonly bias: boolean;
}

const CASES: TcCase[] = [
  { name: 'E 32, top-4, 512 rows (16 an expert: BM 32), K 256, N 384', tokens: 128, topK: 4, E: 32, N: 384, K: 256, routing: 'ids', bias: true },
  { name: 'E 32, top-4, 2048 rows (64 an expert: BM 64), K 2880, N 200', tokens: 512, topK: 4, E: 32, N: 200, K: 2880, routing: 'ids', bias: true },
  { name: 'E 8, top-2, 1024 rows (128 an expert: BM 128), K 96 (a k tail), N 129 (odd)', tokens: 512, topK: 2, E: 8, N: 129, K: 96, routing: 'ids', bias: false },
  { name: 'offsets over E 6 with padding rows, 300 rows, K 160, N 256', tokens: 300, topK: 1, E: 6, N: 256, K: 160, routing: 'offsets', bias: true },
];

/** The case's routing (ids i64 / offsets i32) and its call arguments builder. */
function routingOf(c: TcCase, rng: Rng): { route: Tensor; args: (x: Tensor, w: Tensor[], r: Tensor, b: Tensor | null) => (Tensor | null)[] } {
  const T = c.tokens * c.topK;
  const values = c.routing === 'ids' ? skewedIds(rng, c.tokens, c.E, c.topK, 2) : groupedGemmRouting({ T, E: c.E, N: c.N, K: c.K, routing: 'offsets', bias: c.bias, transposed: false }, rng);
  if (c.routing === 'ids') values[5] = -1; // a row no expert takes (expert parallelism's other ranks)
  const route = intsCpu(values, [values.length], c.routing === 'ids' ? 'i64' : 'i32');
  return { route, args: (x, w, r, b) => (c.routing === 'ids' ? [x, ...w, null, r, b] : [x, ...w, r, null, b]) };
}

type Format = 'k-contiguous' | 'n-contiguous' | 'mxfp4';

function checkAgainstCpu(c: TcCase, dtype: DType, format: Format, seed: number): void {
  releasing((keep) => {
    const rng = new Rng(seed);
    const T = c.tokens * c.topK;
    const x = keep(randCpu([T, c.K], dtype, seed + 1));
    const scale = 1 / Math.sqrt(c.K);
    // dense weights as stored ([E, N, K], or HF's [E, K, N]) and the [E, N, K] view the op takes
    const stored = format === 'mxfp4' ? mxfp4Cpu(keep, rng, c.E, c.N, c.K) : [keep(randCpu(format === 'k-contiguous' ? [c.E, c.N, c.K] : [c.E, c.K, c.N], dtype, seed + 2, scale))];
    const asOp = (t: Tensor[]) => (format === 'n-contiguous' ? [keep(t[0]!.transpose(1, 2))] : t);
    const bias = c.bias ? keep(randCpu([c.E, c.N], dtype, seed + 3, 0.1)) : null;
    const { route, args } = routingOf(c, rng);
    keep(route);
    const op = format === 'mxfp4' ? 'mxfp4_grouped_gemm' : 'grouped_gemm';
    const want = keep(callOp1(op, args(x, asOp(stored), route, bias)));
    const gArgs = args(keep(toGpu(x)), asOp(stored.map((t) => keep(toGpu(t)))), keep(toGpu(route)), bias ? keep(toGpu(bias)) : null);
    const declines = format === 'n-contiguous' && c.N % 8 !== 0; // chunks of 8 columns
    expect(opRoute(op, gArgs), c.name).toEqual({ via: declines ? 'decomposition' : 'kernel' });
    const got = keep(callOp1(op, gArgs));
    expectClose(got, want, tolOf(dtype), `${op} ${c.name} ${dtype}`);
  });
}

describe('the tensor-core grouped GEMM = the float64 CPU op', () => {
  for (const dtype of ['bf16', 'f16'] as DType[]) {
    for (const [f, format] of (['mxfp4', 'k-contiguous', 'n-contiguous'] as Format[]).entries()) {
      it(`${format === 'mxfp4' ? 'mxfp4_grouped_gemm' : `grouped_gemm (${format})`} ${dtype}: gpt-oss-like routing, each tile, tails`, G, () => {
        CASES.forEach((c, i) => checkAgainstCpu(c, dtype, format, 300 + 10 * i + f));
      });
    }
  }
});

describe("gpt-oss-20b's gate_up at its real shape (E 32, K 2880, N 5760, MXFP4 + bias, bf16)", () => {
  const [E, K, N, topK] = [32, 2880, 5760, 4];
  for (const tokens of [128, 1024]) {
    it(`${tokens * topK} routed rows: = mxfp4_dequant + grouped_gemm (both layouts) bit for bit, ~ one cuBLAS linear an expert`, G, () => {
      releasing((keep) => {
        const rng = new Rng(900 + tokens);
        const T = tokens * topK;
        const [blocks, scales] = mxfp4Cpu(keep, rng, E, N, K).map((t) => keep(toGpu(t))) as [Tensor, Tensor];
        const x = keep(toGpu(keep(randCpu([T, K], 'bf16', 901))));
        const bias = keep(toGpu(keep(randCpu([E, N], 'bf16', 902, 0.1))));
        const idsHost = skewedIds(rng, tokens, E, topK, 3);
        const ids = keep(toGpu(keep(intsCpu(idsHost, [T], 'i64'))));
        expect(opRoute('mxfp4_grouped_gemm', [x, blocks, scales, null, ids, bias])).toEqual({ via: 'kernel' });
        const got = keep(callOp1('mxfp4_grouped_gemm', [x, blocks, scales, null, ids, bias]));
        const dense = keep(callOp1('mxfp4_dequant', [blocks, scales], { dtype: 'bf16' }));
        expectBitEqual(got, keep(callOp1('grouped_gemm', [x, dense, null, ids, bias])), 'vs dequant + grouped_gemm');
        // gpt-oss's dense form: HF's [E, K, N] storage seen as [E, N, K] (n contiguous), the same values: the same bits
        const hf = keep(keep(dense.transpose(1, 2)).contiguous());
        expectBitEqual(got, keep(callOp1('grouped_gemm', [x, keep(hf.transpose(1, 2)), null, ids, bias])), 'vs grouped_gemm on the [E, K, N] view');
        // the decomposition's GEMMs: one cuBLAS linear over each expert's rows
        for (let e = 0; e < E; e++) {
          const rows = idsHost.flatMap((v, r) => (v === e ? [r] : []));
          if (rows.length === 0) continue;
          const idx = keep(toGpu(keep(intsCpu(rows, [rows.length], 'i64'))));
          const views = keep([dense.select(0, e), bias.select(0, e)]);
          const want = keep(callOp1('linear', [keep(callOp1('index_select', [x, idx], { dim: 0 })), ...views]));
          expectClose(keep(callOp1('index_select', [got, idx], { dim: 0 })), want, tolOf('bf16'), `expert ${e} (${rows.length} rows)`);
        }
      });
    });
  }
});

describe('the tensor-core grouped GEMM in a CUDA graph', () => {
  it('mxfp4_grouped_gemm, 512 routed rows: replays = eager calls bit for bit, over two routings', G, () => {
    releasing((keep) => {
      const [E, K, N, tokens, topK] = [32, 2880, 720, 128, 4];
      const T = tokens * topK;
      const rng = new Rng(77);
      const [blocks, scales] = mxfp4Cpu(keep, rng, E, N, K).map((t) => keep(toGpu(t))) as [Tensor, Tensor];
      const x = keep(toGpu(keep(randCpu([T, K], 'bf16', 78))));
      const bias = keep(toGpu(keep(randCpu([E, N], 'bf16', 79, 0.1))));
      const routings = [skewedIds(rng, tokens, E, topK, 2), skewedIds(rng, tokens, E, topK, 9)].map((v) => keep(intsCpu(v, [T], 'i64')));
      const ids = keep(toGpu(routings[0]!));
      const rt = gpu().runtime;
      keep(callOp1('mxfp4_grouped_gemm', [x, blocks, scales, null, ids, bias])); // compiles both kernels before the capture
      rt.synchronize();
      let out: Tensor | undefined;
      const graph = rt.capture(() => {
        out = callOp1('mxfp4_grouped_gemm', [x, blocks, scales, null, ids, bias]);
      }, { poolBytes: 64 << 20 });
      try {
        for (const r of [routings[1]!, routings[0]!]) {
          ids.copy_(keep(toGpu(r)));
          graph.replay();
          rt.synchronize();
          const eager = keep(callOp1('mxfp4_grouped_gemm', [x, blocks, scales, null, ids, bias]));
          expectBitEqual(out!, eager, 'graph replay vs eager');
        }
      } finally {
        out?.dispose();
        graph.destroy();
      }
    });
  });
});
