/**
 * grouped_gemm on the GPU (grouped-gemm-source.ts, CUDA cores) against the float64 CPU op: f32 / f16 / bf16, routing by
 * expert_ids (with -1 rows) and by offsets (with padding rows past offsets[E]), with and without bias, weights as [E, N,
 * K] rows and as the transposed view of HF's [E, K, N] (gpt-oss's gate_up_proj), K / N tails; the route each call takes
 * (the kernel up to GROUPED_GEMM_EAGER_ROWS rows; past it the tensor-core kernel at bf16 / f16, see
 * grouped-gemm-tc.gpu.test.ts, else the per-expert decomposition eagerly); a CUDA graph capture of an f32 call past that
 * row count (the GEMV kernel under capture), replayed over new expert ids. mxfp4_grouped_gemm (the packed
 * form read in place) the same way, random blocks and scales around 1 / sqrt(K). L2/gpt_oss_moe (dense and MXFP4
 * experts) end to end on CUDA against its float64 reference.
 */
import { describe, expect, it } from 'vitest';
import { groupedGemmRouting, type GroupedGemmCase } from '../../../test/moe-routing.js';
import { ModuleRegistry, Rng, Tensor, callOp1, opRoute, type DType } from '@fastkernels/core';
import { baselineRegistry } from '@fastkernels/model-zoo';
import { G, checkTaskOnCuda, cpu, expectClose, gpu, intsCpu, randCpu, releasing, task, toGpu, tolOf } from '../../../test/spine-helpers.js';
import { GROUPED_GEMM_EAGER_ROWS } from './grouped-gemm.js';

function check(c: GroupedGemmCase, dtype: DType, seed: number): void {
  releasing((keep) => {
    const rng = new Rng(seed);
    const x = keep(randCpu([c.T, c.K], dtype, seed + 1));
    const wBase = keep(randCpu(c.transposed ? [c.E, c.K, c.N] : [c.E, c.N, c.K], dtype, seed + 2, 1 / Math.sqrt(c.K)));
    const bias = c.bias ? keep(randCpu([c.E, c.N], dtype, seed + 3, 0.1)) : null;
    const route = groupedGemmRouting(c, rng);
    const r = keep(intsCpu(route, [route.length], seed % 2 ? 'i32' : 'i64'));
    const w = keep(c.transposed ? wBase.transpose(1, 2) : wBase.view(...wBase.shape));
    const args = (xx: Tensor, ww: Tensor, rr: Tensor, bb: Tensor | null) => (c.routing === 'ids' ? [xx, ww, null, rr, bb] : [xx, ww, rr, null, bb]);
    const want = keep(callOp1('grouped_gemm', args(x, w, r, bias)));
    const wGpuBase = keep(toGpu(wBase));
    const wGpu = keep(c.transposed ? wGpuBase.transpose(1, 2) : wGpuBase.view(...wGpuBase.shape));
    const gArgs = args(keep(toGpu(x)), wGpu, keep(toGpu(r)), bias ? keep(toGpu(bias)) : null);
    const route0 = opRoute('grouped_gemm', gArgs);
    // past the eager rows: the tensor-core kernel at bf16 / f16 on [E, N, K] rows, else the decomposition
    const tensorCore = dtype !== 'f32' && c.K % 8 === 0 && (!c.transposed || c.N % 8 === 0);
    expect(route0, JSON.stringify(c)).toEqual({ via: c.T <= GROUPED_GEMM_EAGER_ROWS || tensorCore ? 'kernel' : 'decomposition' });
    const got = keep(callOp1('grouped_gemm', gArgs));
    expectClose(got, want, tolOf(dtype), `grouped_gemm ${JSON.stringify(c)} ${dtype}`);
  });
}

const CASES: GroupedGemmCase[] = [
  { T: 1, E: 8, N: 64, K: 32, routing: 'ids', bias: true, transposed: false },
  { T: 9, E: 8, N: 70, K: 45, routing: 'ids', bias: false, transposed: false },
  { T: 16, E: 4, N: 96, K: 64, routing: 'ids', bias: true, transposed: true },
  { T: 12, E: 6, N: 33, K: 130, routing: 'offsets', bias: true, transposed: false },
  { T: 20, E: 5, N: 300, K: 24, routing: 'offsets', bias: false, transposed: true },
  { T: 8, E: 8, N: 2 * 2880 / 8, K: 2880, routing: 'ids', bias: true, transposed: true }, // gpt-oss-20b's K, N and E cut
  { T: 100, E: 8, N: 64, K: 48, routing: 'ids', bias: true, transposed: false }, // past the eager rows: tensor cores (f32: decomposition)
  { T: 100, E: 8, N: 64, K: 48, routing: 'ids', bias: true, transposed: true }, // past the eager rows, a transposed view: tensor cores
  { T: 100, E: 8, N: 60, K: 48, routing: 'ids', bias: true, transposed: true }, // the same with N % 8 != 0: decomposition
];

describe('grouped_gemm on CUDA = the float64 CPU op', () => {
  for (const dtype of ['f32', 'bf16', 'f16'] as DType[]) {
    it(`${dtype}: ids / offsets, bias, both weight layouts, tails`, G, () => {
      CASES.forEach((c, i) => check(c, dtype, 40 + i));
    });
  }
});

describe('grouped_gemm in a CUDA graph', () => {
  it('a call past the eager row count: decomposed eagerly, the kernel under capture (compiled by the hook), replayed over new expert ids', G, () => {
    releasing((keep) => {
      const [T, E, N, K] = [GROUPED_GEMM_EAGER_ROWS + 36, 8, 64, 96];
      const rng = new Rng(5);
      const x = keep(randCpu([T, K], 'f32', 1));
      const w = keep(randCpu([E, N, K], 'f32', 2, 1 / Math.sqrt(K)));
      const b = keep(randCpu([E, N], 'f32', 3, 0.1));
      const ids = (allowed: number) => keep(intsCpu(Array.from({ length: T }, () => rng.int(-1, allowed)), [T], 'i64'));
      const [first, second] = [ids(E), ids(3)];
      const gX = keep(toGpu(x));
      const gW = keep(toGpu(w));
      const gB = keep(toGpu(b));
      const gIds = keep(toGpu(first));
      const rt = gpu().runtime;
      // as the engine's warm-up: the same call eagerly first, which declines (too many rows) and queues the kernel's
      // compile for the capture hook (a module load during capture would fail the capture)
      expect(opRoute('grouped_gemm', [gX, gW, null, gIds, gB])).toEqual({ via: 'decomposition' });
      keep(callOp1('grouped_gemm', [gX, gW, null, gIds, gB]));
      rt.synchronize();
      let out: Tensor | undefined;
      const graph = rt.capture(() => {
        out = callOp1('grouped_gemm', [gX, gW, null, gIds, gB]);
      }, { poolBytes: 8 << 20 });
      try {
        for (const routing of [second, first]) {
          gIds.copy_(keep(toGpu(routing)));
          graph.replay();
          const want = keep(callOp1('grouped_gemm', [x, w, null, routing, b]));
          expectClose(out!, want, tolOf('f32'), 'graph replay');
        }
      } finally {
        out?.dispose();
        graph.destroy();
      }
    });
  });
});

function checkMxfp4(c: Omit<GroupedGemmCase, 'transposed'>, dtype: DType, seed: number): void {
  releasing((keep) => {
    const rng = new Rng(seed);
    const G_ = c.K / 32;
    const x = keep(randCpu([c.T, c.K], dtype, seed + 1));
    const blocks = keep(Tensor.fromArray(cpu(), Array.from({ length: c.E * c.N * G_ * 16 }, () => rng.int(0, 256)), [c.E, c.N, G_, 16], 'u8'));
    const center = 127 - Math.round(Math.log2(Math.sqrt(c.K)) + 1.5);
    const scales = keep(Tensor.fromArray(cpu(), Array.from({ length: c.E * c.N * G_ }, () => center + rng.int(-1, 2)), [c.E, c.N, G_], 'u8'));
    const bias = c.bias ? keep(randCpu([c.E, c.N], dtype, seed + 3, 0.1)) : null;
    const route = groupedGemmRouting({ ...c, transposed: false }, rng);
    const r = keep(intsCpu(route, [route.length], seed % 2 ? 'i32' : 'i64'));
    const args = (xx: Tensor, bb: Tensor, ss: Tensor, rr: Tensor, bi: Tensor | null) => (c.routing === 'ids' ? [xx, bb, ss, null, rr, bi] : [xx, bb, ss, rr, null, bi]);
    const want = keep(callOp1('mxfp4_grouped_gemm', args(x, blocks, scales, r, bias)));
    const gArgs = args(keep(toGpu(x)), keep(toGpu(blocks)), keep(toGpu(scales)), keep(toGpu(r)), bias ? keep(toGpu(bias)) : null);
    expect(opRoute('mxfp4_grouped_gemm', gArgs), JSON.stringify(c)).toEqual({ via: c.T <= GROUPED_GEMM_EAGER_ROWS || dtype !== 'f32' ? 'kernel' : 'decomposition' });
    const got = keep(callOp1('mxfp4_grouped_gemm', gArgs));
    expectClose(got, want, tolOf(dtype), `mxfp4_grouped_gemm ${JSON.stringify(c)} ${dtype}`);
  });
}

const MXFP4_CASES: Omit<GroupedGemmCase, 'transposed'>[] = [
  { T: 1, E: 8, N: 64, K: 64, routing: 'ids', bias: true },
  { T: 9, E: 8, N: 70, K: 96, routing: 'ids', bias: false },
  { T: 12, E: 6, N: 33, K: 128, routing: 'offsets', bias: true },
  { T: 8, E: 8, N: 720, K: 2880, routing: 'ids', bias: true }, // gpt-oss-20b's K (90 blocks a row), N and E cut
  { T: 100, E: 4, N: 64, K: 64, routing: 'ids', bias: true }, // past the eager rows: tensor cores (f32: dequant + grouped_gemm)
];

describe('mxfp4_grouped_gemm on CUDA = the float64 CPU op', () => {
  for (const dtype of ['f32', 'bf16', 'f16'] as DType[]) {
    it(`${dtype}: ids / offsets, bias, tails, gpt-oss-20b's K`, G, () => {
      MXFP4_CASES.forEach((c, i) => checkMxfp4(c, dtype, 70 + i));
    });
  }
});

describe('L2/gpt_oss_moe on CUDA (router, top-k softmax, grouped_gemm with biases, clamped SwiGLU) = its float64 reference', () => {
  const registry: ModuleRegistry = baselineRegistry();
  const t = task('L2/gpt_oss_moe');
  for (const c of t.cases.ci) {
    it(c.name, G, () => checkTaskOnCuda(t, c, 21, registry));
  }
});
