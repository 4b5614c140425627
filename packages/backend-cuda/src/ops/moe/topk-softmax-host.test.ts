/**
 * kernels/moe_topk_softmax.cu run on the host (test/host-cuda.ts: g++, a CTA's 128 threads as std::threads, warp
 * shuffles through per-warp arrays; FK_HOST_REPLAY=1 with bf16 / f16 as bit patterns) with the launcher's source and
 * plan, against topk_softmax in float64 on the CPU backend (the op's kernel, itself held to a sorted softmax): ids
 * exactly, weights to float32 rounding. Mixtral (E 8, top-2: four rows a warp), Qwen3-30B-A3B (E 128, top-8) and
 * gpt-oss-20b (E 32, top-4) at 1, 7 and 513 tokens, renormalised or not, f32 / bf16 / f16 logits (bf16: many equal
 * logits, so ties go to the lower id); plus Qwen3-Next's 512 experts (top-10), widths that leave lanes without an
 * expert (E 6, 20), E 1, k = E, a row stride past E, and rows whose logits are all equal.
 * What this cannot see: real warp divergence, timing. Skipped where g++ is absent.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor, callOp, roundToDType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cArray, hasGxx, runOnHost } from '../../../test/host-cuda.js';
import { topkSoftmaxSource, type TopkSoftmaxVariant } from './topk-softmax.js';
import { TOPK_SOFTMAX_THREADS, planTopkSoftmax, type TopkSoftmaxPlan } from './topk-softmax-plan.js';

const cpu = new CpuBackend();

/** The CUDA built-ins the kernel uses beyond host-cuda.ts's: bf16 / f16 as bits, 64-bit xor shuffles, bit casts. */
const TOPK_SHIM = `#include <algorithm>
#include <cstdint>
#define FK_HOST_REPLAY 1
struct __nv_bfloat16 { unsigned short x; };
struct __half { unsigned short x; };
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static unsigned long long fk_u64_lanes[4][32];  // a 128-thread CTA's warps
inline unsigned long long __shfl_xor_sync(unsigned, unsigned long long v, int o) {
  const unsigned w = threadIdx.x >> 5, lane = threadIdx.x & 31u;
  fk_u64_lanes[w][lane] = v;
  fk_this_warp->bar.arrive_and_wait();
  const unsigned long long r = fk_u64_lanes[w][lane ^ (unsigned)o];
  fk_this_warp->bar.arrive_and_wait();
  return r;
}
namespace fktopk {
inline float to_float(__nv_bfloat16 x) { return __uint_as_float((unsigned)x.x << 16); }
inline float to_float(__half h) {
  const unsigned s = (h.x >> 15) & 1u, e = (h.x >> 10) & 31u, m = h.x & 1023u;
  const float mag = e == 0 ? std::ldexp((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp((float)(m | 1024u), (int)e - 25);
  return s ? -mag : mag;
}
}  // namespace fktopk
`;

/** The bit pattern of a value already rounded to bf16 / f16. */
function bitsOf(v: number, dtype: 'bf16' | 'f16'): number {
  if (dtype === 'bf16') return new Uint32Array(new Float32Array([v]).buffer)[0]! >>> 16;
  const sign = v < 0 || Object.is(v, -0) ? 0x8000 : 0;
  const a = Math.abs(v);
  if (a === 0) return sign;
  if (a < 2 ** -14) return sign | Math.round(a * 2 ** 24); // subnormal
  const e = Math.floor(Math.log2(a));
  const m = Math.round((a / 2 ** e - 1) * 1024);
  return sign | ((e + 15) << 10) | m;
}

interface RoutingCase {
  readonly name: string;
  readonly T: number;
  readonly E: number;
  readonly k: number;
  readonly renormalize: boolean;
  readonly dtype: 'f32' | 'bf16' | 'f16';
  /** elements between rows (default E) */
  readonly stride?: number;
  /** logits of row t, expert e (default: normal, scale 2) */
  readonly logit?: (t: number, e: number, rng: Rng) => number;
}

/** The logits [T, stride] as the kernel reads them (rounded to the dtype; junk between rows). */
function logitsOf(c: RoutingCase, rng: Rng): { values: number[]; rows: number[] } {
  const stride = c.stride ?? c.E;
  const values: number[] = [];
  const rows: number[] = [];
  for (let t = 0; t < c.T; t++) {
    for (let e = 0; e < stride; e++) {
      const raw = e < c.E ? (c.logit ? c.logit(t, e, rng) : rng.normal() * 2) : 1e4; // junk past E: never an expert
      const v = roundToDType(raw, c.dtype);
      values.push(v);
      if (e < c.E) rows.push(v);
    }
  }
  return { values, rows };
}

/** weights and ids as the kernel writes them for cases of one specialisation: one g++ build for them. */
function runKernel(v: TopkSoftmaxVariant, cases: readonly { c: RoutingCase; values: number[]; plan: TopkSoftmaxPlan }[]): { weights: number[]; ids: number[] }[] {
  const ctype = v.dtype === 'f32' ? 'float' : v.dtype === 'bf16' ? '__nv_bfloat16' : '__half';
  let decls = '';
  let body = '';
  cases.forEach(({ c, values, plan }, i) => {
    decls += v.dtype === 'f32' ? `${cArray('float', `x${i}`, values)}\n` : `${cArray('unsigned short', `x${i}`, values.map((x) => bitsOf(x, c.dtype as 'bf16' | 'f16')))}\n`;
    decls += `static float w${i}[${c.T * c.k}]; static int id${i}[${c.T * c.k}];\n`;
    // poison the outputs: every entry must be written
    body += `  std::fill_n(w${i}, ${c.T * c.k}, NAN); std::fill_n(id${i}, ${c.T * c.k}, -7);
  fk_launch({${plan.grid}, 1, 1}, ${TOPK_SOFTMAX_THREADS}, [] { fk_moe_topk_softmax((const ${ctype}*)x${i}, w${i}, id${i}, ${c.T}, ${c.stride ?? c.E}LL, ${c.renormalize ? 1 : 0}); });
  for (int i = 0; i < ${c.T * c.k}; i++) printf("%.9g\\n%d\\n", w${i}[i], id${i}[i]);
`;
  });
  const out = runOnHost(`${TOPK_SHIM}\n${topkSoftmaxSource(v).source}`, `${decls}int main() {\n${body}}`);
  let at = 0;
  return cases.map(({ c }) => {
    const weights: number[] = [];
    const ids: number[] = [];
    for (let j = 0; j < c.T * c.k; j++) {
      weights.push(out[at++]!);
      ids.push(out[at++]!);
    }
    return { weights, ids };
  });
}

function expectRouted(c: RoutingCase, rows: number[], got: { weights: number[]; ids: number[] }): void {
  const x = Tensor.fromArray(cpu, rows, [c.T, c.E], 'f64');
  const [w, ids] = callOp('topk_softmax', [x], { k: c.k, renormalize: c.renormalize });
  const wantIds = Array.from(ids!.toFloat64Array());
  const wantW = w!.toFloat64Array();
  for (const t of [x, w, ids]) t!.dispose();
  expect(got.ids, `${c.name}: ids`).toEqual(wantIds);
  for (let i = 0; i < wantW.length; i++) {
    if (!(Math.abs(got.weights[i]! - wantW[i]!) <= 2e-7 + 2e-6 * wantW[i]!)) {
      throw new Error(`${c.name}: weight ${i} (row ${Math.floor(i / c.k)}) is ${got.weights[i]}, float64 says ${wantW[i]}`);
    }
  }
}

function check(cases: RoutingCase[], seed: number): void {
  const rng = new Rng(seed);
  const byVariant = new Map<string, { v: TopkSoftmaxVariant; runs: { c: RoutingCase; values: number[]; rows: number[]; plan: TopkSoftmaxPlan }[] }>();
  for (const c of cases) {
    const plan = planTopkSoftmax(c.T, c.E, c.k);
    if (typeof plan === 'string') throw new Error(plan);
    const v: TopkSoftmaxVariant = { dtype: c.dtype, experts: c.E, k: c.k, lanes: plan.lanes };
    const key = JSON.stringify(v);
    if (!byVariant.has(key)) byVariant.set(key, { v, runs: [] });
    byVariant.get(key)!.runs.push({ c, plan, ...logitsOf(c, rng) });
  }
  for (const { v, runs } of byVariant.values()) {
    const got = runKernel(v, runs);
    runs.forEach((r, i) => expectRouted(r.c, r.rows, got[i]!));
  }
}

const MODELS = [
  { name: 'Mixtral', E: 8, k: 2, renormalize: true },
  { name: 'Qwen3-30B-A3B', E: 128, k: 8, renormalize: true },
  { name: 'gpt-oss-20b', E: 32, k: 4, renormalize: true },
];

describe(`moe_topk_softmax's kernel on the host${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  for (const m of MODELS) {
    // T 513: many CTAs and a part-filled last one (the grid is ceil(T / rows a CTA), no cap: 4096 tokens replay the same
    // code 8x longer; the GPU test runs 4096)
    it.skipIf(!hasGxx)(`${m.name} (E ${m.E}, top-${m.k}) at T 1, 7 (f32, bf16, f16; renormalised or not) and 513 (bf16) = float64`, () => {
      const cases: RoutingCase[] = [];
      for (const dtype of ['f32', 'bf16', 'f16'] as const) {
        for (const T of [1, 7]) for (const renormalize of [true, false]) cases.push({ ...m, name: `${m.name} T ${T} ${dtype}${renormalize ? '' : ' raw'}`, T, dtype, renormalize });
      }
      cases.push({ ...m, name: `${m.name} T 513 bf16`, T: 513, dtype: 'bf16' });
      check(cases, 11 + m.E);
    }, 600_000);
  }

  it.skipIf(!hasGxx)('Qwen3-Next (E 512, top-10), E 6 and 20 (lanes without an expert), E 1, k = E, a row stride past E, equal logits', () => {
    check(
      [
        { name: 'Qwen3-Next E 512 top-10 bf16', T: 9, E: 512, k: 10, renormalize: true, dtype: 'bf16' },
        { name: 'Qwen3-Next E 512 top-10 f32', T: 5, E: 512, k: 10, renormalize: false, dtype: 'f32' },
        { name: 'E 6 top-2 (8 lanes, 2 idle)', T: 37, E: 6, k: 2, renormalize: true, dtype: 'f32' },
        { name: 'E 20 top-3 (32 lanes, 12 idle)', T: 9, E: 20, k: 3, renormalize: false, dtype: 'f16' },
        { name: 'E 1', T: 5, E: 1, k: 1, renormalize: true, dtype: 'f32' },
        { name: 'k = E = 8', T: 6, E: 8, k: 8, renormalize: false, dtype: 'bf16' },
        { name: 'k = 32 of 64 (a result in every lane)', T: 3, E: 64, k: 32, renormalize: true, dtype: 'f32' },
        { name: 'row stride 40 for E 32', T: 7, E: 32, k: 4, renormalize: true, dtype: 'bf16', stride: 40 },
        { name: 'equal logits: ids 0..k-1', T: 3, E: 128, k: 8, renormalize: true, dtype: 'bf16', logit: () => 0.5 },
        { name: 'few distinct logits, -0 and +0', T: 8, E: 32, k: 6, renormalize: true, dtype: 'f32', logit: (_t, e, rng) => (e % 5 === 0 ? (rng.int(0, 2) ? -0 : 0) : rng.int(-2, 3)) },
      ],
      5,
    );
  }, 600_000);
});
