/**
 * The generated grouped_gemm / mxfp4_grouped_gemm kernels (f32 variants) run on the host (test/host-cuda.ts: g++, a CTA's
 * threads as std::threads, warp shuffles emulated) with the launch geometry and arguments the launchers pass, against
 * the float64 CPU op: routing by ids (with -1 rows) and by offsets (padding rows past offsets[E]), bias or not, [E, N, K]
 * rows and the transposed [E, K, N] view, K / N tails. What this cannot see: f16 / bf16 conversions, alignment faults,
 * real warp divergence. Skipped where g++ is absent.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor, callOp1 } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { groupedGemmRouting, type GroupedGemmCase } from '../../../test/moe-routing.js';
import { cArray, hasGxx, runOnHost } from '../../../test/host-cuda.js';
import { GROUPED_GEMM_THREADS, groupedGemmColumnsPerCta, groupedGemmSource, mxfp4GroupedGemmSource } from './grouped-gemm-source.js';

const cpu = new CpuBackend();

function expectNear(got: number[], want: Float64Array, label: string): void {
  expect(got.length, label).toBe(want.length);
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!) / (1e-5 + 1e-5 * Math.abs(want[i]!)));
  expect(worst, `${label}: worst error / tolerance`).toBeLessThanOrEqual(1);
}

const CASES: GroupedGemmCase[] = [
  { T: 5, E: 4, N: 19, K: 40, routing: 'ids', bias: true, transposed: false },
  { T: 6, E: 3, N: 9, K: 33, routing: 'ids', bias: false, transposed: true },
  { T: 7, E: 4, N: 13, K: 70, routing: 'offsets', bias: true, transposed: false },
  { T: 6, E: 5, N: 300, K: 8, routing: 'offsets', bias: true, transposed: true },
];

describe(`grouped_gemm's generated kernel on the host${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  CASES.forEach((c, n) => {
    it.skipIf(!hasGxx)(JSON.stringify(c), () => {
      const rng = new Rng(100 + n);
      const x = rng.fillNormal(c.T * c.K, 1);
      const wStored = rng.fillNormal(c.E * c.N * c.K, 1 / Math.sqrt(c.K)); // [E, N, K], or [E, K, N] when transposed
      const b = rng.fillNormal(c.E * c.N, 0.1);
      const route = groupedGemmRouting(c, rng, 5, 2);
      const tx = Tensor.fromArray(cpu, x, [c.T, c.K], 'f32');
      const tw0 = Tensor.fromArray(cpu, wStored, c.transposed ? [c.E, c.K, c.N] : [c.E, c.N, c.K], 'f32');
      const tw = c.transposed ? tw0.transpose(1, 2) : tw0;
      const tb = c.bias ? Tensor.fromArray(cpu, b, [c.E, c.N], 'f32') : null;
      const tr = Tensor.fromArray(cpu, route, [route.length], 'i64');
      const want = callOp1('grouped_gemm', c.routing === 'ids' ? [tx, tw, null, tr, tb] : [tx, tw, tr, null, tb]).toFloat64Array();
      const layout = c.transposed ? 'n-contiguous' : 'k-contiguous';
      const src = groupedGemmSource({ dtype: 'f32', routing: c.routing, index: 'i64', bias: c.bias, layout });
      const [se, sn, sk] = tw.strides as [number, number, number];
      const main = `${cArray('float', 'x', x)}
${cArray('float', 'w', wStored)}
${cArray('float', 'b', b)}
${cArray('long long', 'route', route)}
static float out[${c.T * c.N}];
int main() {
  fk_launch({${Math.ceil(c.N / groupedGemmColumnsPerCta(layout))}, ${c.T}, 1}, ${GROUPED_GEMM_THREADS}, [] {
    fk_grouped_gemm(out, x, w, route, ${c.bias ? 'b' : 'nullptr'}, ${c.T}, ${c.N}, ${c.K}, ${c.E}, ${c.K}LL, ${se}LL, ${sn}LL, ${sk}LL, ${c.N}LL);
  });
  for (int i = 0; i < ${c.T * c.N}; i++) printf("%.17g\\n", (double)out[i]);
}`;
      expectNear(runOnHost(src.source, main), want, `grouped_gemm ${layout}`);
      for (const t of [tx, tw, tw0, tb, tr]) t?.dispose();
    }, 120_000);
  });
});

describe(`mxfp4_grouped_gemm's generated kernel on the host${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  CASES.filter((c) => !c.transposed).forEach((c0, n) => {
    const c = { ...c0, K: 64 };
    it.skipIf(!hasGxx)(JSON.stringify(c), () => {
      const rng = new Rng(200 + n);
      const G = c.K / 32;
      const x = rng.fillNormal(c.T * c.K, 1);
      const blocks = Array.from({ length: c.E * c.N * G * 16 }, () => rng.int(0, 256));
      const scales = Array.from({ length: c.E * c.N * G }, () => 124 + rng.int(0, 4));
      const b = rng.fillNormal(c.E * c.N, 0.1);
      const route = groupedGemmRouting(c, rng, 5, 2);
      const tx = Tensor.fromArray(cpu, x, [c.T, c.K], 'f32');
      const tbl = Tensor.fromArray(cpu, blocks, [c.E, c.N, G, 16], 'u8');
      const tsc = Tensor.fromArray(cpu, scales, [c.E, c.N, G], 'u8');
      const tb = c.bias ? Tensor.fromArray(cpu, b, [c.E, c.N], 'f32') : null;
      const tr = Tensor.fromArray(cpu, route, [route.length], 'i32');
      const want = callOp1('mxfp4_grouped_gemm', c.routing === 'ids' ? [tx, tbl, tsc, null, tr, tb] : [tx, tbl, tsc, tr, null, tb]).toFloat64Array();
      const src = mxfp4GroupedGemmSource({ dtype: 'f32', routing: c.routing, index: 'i32', bias: c.bias });
      const main = `${cArray('float', 'x', x)}
${cArray('unsigned char', 'blocks', blocks)}
${cArray('unsigned char', 'scales', scales)}
${cArray('float', 'b', b)}
${cArray('int', 'route', route)}
static float out[${c.T * c.N}];
int main() {
  fk_launch({${Math.ceil(c.N / groupedGemmColumnsPerCta('k-contiguous'))}, ${c.T}, 1}, ${GROUPED_GEMM_THREADS}, [] {
    fk_mxfp4_grouped_gemm(out, x, blocks, scales, route, ${c.bias ? 'b' : 'nullptr'}, ${c.T}, ${c.N}, ${c.K}, ${c.E}, ${c.K}LL, ${c.N}LL);
  });
  for (int i = 0; i < ${c.T * c.N}; i++) printf("%.17g\\n", (double)out[i]);
}`;
      expectNear(runOnHost(src.source, main), want, 'mxfp4_grouped_gemm');
      for (const t of [tx, tbl, tsc, tb, tr]) t?.dispose();
    }, 120_000);
  });
});
