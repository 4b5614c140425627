/**
 * The sampler's host side and kernels without a GPU. (1) On a fake device (test/fake-device.ts checks every launch's
 * arguments against the kernel's signature): which kernels each path launches, in which order, with which grids.
 * (2) kernels/sampler.cu replayed with g++ (test/host-cuda.ts: a CTA's threads as std::threads, CTAs one after another;
 * here __syncthreads as a CTA barrier that exited threads leave, warp shuffles / ballots of any 8-byte type through a
 * per-warp slot array, atomics as std::atomic_ref): the multi-CTA path (fk_ms_max, six fk_ms_hist stages with each
 * row's last CTA selecting, fk_ms_race with its last CTA writing the token), the one-CTA-a-row fk_sample, and the greedy
 * split, on the same rows: greedy, temperature only, top-k, top-p, both, quantized logits (ties at the top-k threshold
 * and top-p cuts inside a tied group), NaN and -inf rows. The paths must agree token for token, and with the CPU
 * backend's float64 sampler. Host libm's expf / logf stand in for CUDA's; the memory system (fences, L2 reads) is the
 * GPU tests' (sampler.gpu / sampler-multicta.gpu). Skipped where g++ is absent.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fakeDevice } from '../../../test/fake-device.js';
import { CTA_SHIM, WARP_LANES_SHIM, cArray, hasGxx, runOnHost } from '../../../test/host-cuda.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import { planSampler, sample } from './sampler.js';

describe('sampler launches (fake device)', () => {
  const V = 128256;
  function launch(B: number, sampledRows: number) {
    const { backend, ctx, launches } = fakeDevice();
    const t = (dtype: 'f32' | 'i32' | 'i64', shape: number[]) => Tensor.empty(backend, shape, dtype);
    sample(ctx, t('f32', [B, V]), t('f32', [B]), t('i32', [B]), t('f32', [B]), t('i64', [B]), { sampledRows });
    return launches;
  }
  it('B32 x 128256 with 26 drawing rows (the kernels bench): fk_ms_max, six fk_ms_hist stages, fk_ms_race, on C x B CTAs', () => {
    const l = launch(32, 26);
    expect(l.map((x) => x.entry)).toEqual(['fk_ms_max', ...new Array(6).fill('fk_ms_hist'), 'fk_ms_race']);
    const plan = planSampler(32, V, 132);
    for (const x of l) expect(x.grid).toEqual([plan.ctas, 32]);
    expect(l.slice(1, 7).map((x) => x.args.at(-1))).toEqual([0, 1, 2, 3, 4, 5]);
  });
  it('all greedy: B64 one CTA a row (fk_sample); B1 the greedy split (fk_ms_max, fk_ms_init, fk_sample skipping greedy rows)', () => {
    expect(launch(64, 0).map((x) => x.entry)).toEqual(['fk_sample']);
    const split = launch(1, 0);
    expect(split.map((x) => x.entry)).toEqual(['fk_ms_max', 'fk_ms_init', 'fk_sample']);
    expect(split[2]!.options).toContain('-DFK_SKIP_GREEDY=1');
  });
});

/** What the host run needs beyond host-cuda.ts's prelude and CTA_SHIM (its CTA barrier, __shared__, fk_launch_ctas). */
const SHIM = `${CTA_SHIM}
#include <atomic>
typedef unsigned long long fk_u64;
${WARP_LANES_SHIM}template <class T> T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
template <class T> T __ldcg(const T* p) { return std::atomic_ref<T>(*const_cast<T*>(p)).load(); }
template <class T> T __ldg(const T* p) { return *p; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline fk_u64 __float2ull_rn(float f) { return (fk_u64)std::nearbyint((double)f); }
inline int __popc(unsigned m) { return __builtin_popcount(m); }
inline int __ffs(unsigned m) { return __builtin_ffs((int)m); }
inline int min(int a, int b) { return a < b ? a : b; }
`;

interface Row { t: number; k: number; p: number; seed: number }

function rowsFor(B: number, V: number, rng: Rng): Row[] {
  const ks = [-1, 0, 1, 2, 7, 40, V - 1, V, V + 3];
  const ps = [1, 0.95, 0.8, 0.5, 0.1, 0];
  const rows = Array.from({ length: B }, (_, b) => ({
    t: b % 7 === 0 ? 0 : Math.fround(0.4 + 1.2 * rng.uniform()),
    k: ks[b % ks.length]!,
    p: Math.fround(ps[Math.floor(b / 3) % ps.length]!),
    seed: b % 3 === 0 ? -rng.int(1, 2 ** 40) : rng.int(0, 2 ** 50),
  }));
  // the flat rows (logitsFor): top-p keeps the first ceil(p V) indices of one tied group, so the cut decides the draw
  for (const [b, p] of [[2, 0.5], [10, 0.3], [22, 0.77]] as const) if (b < B) rows[b] = { ...rows[b]!, t: 1, k: 0, p: Math.fround(p) };
  return rows;
}

/** Logits: N(0, 2^2) rows; every 4th quantized to quarters (ties); rows 2, 10, 22 flat; row 5 with NaNs, row 11 all -inf but 3 entries. */
function logitsFor(B: number, V: number, rng: Rng): Float32Array {
  const l = new Float32Array(B * V);
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < V; i++) {
      const x = rng.normal() * 2;
      l[b * V + i] = b % 4 === 1 ? Math.round(x * 4) / 4 : x;
    }
  }
  for (const b of [2, 10, 22]) if (b < B) l.fill(1.5, b * V, (b + 1) * V);
  if (B > 5) for (let i = 0; i < V; i += 97) l[5 * V + i] = NaN;
  if (B > 11) for (let i = 0; i < V; i++) if (i % 1000 !== 7) l[11 * V + i] = -Infinity;
  return l;
}

const THREADS = 64;

/** A C float array (NaN, infinities included; finite values round-trip exact). */
function floatArray(name: string, values: ArrayLike<number>): string {
  const f = (v: number) => (Number.isNaN(v) ? 'NAN' : v === Infinity ? 'INFINITY' : v === -Infinity ? '-INFINITY' : `${Math.fround(v).toPrecision(9)}f`);
  return `alignas(16) static float ${name}[${values.length}] = {${Array.from(values, f).join(', ')}};`;
}

/** The tokens of the multi-CTA path, fk_sample and the greedy split on the host, in that order (B each). */
function hostTokens(logits: Float32Array, rows: Row[], V: number, chunk: number): { multi: number[]; single: number[]; split: number[] } {
  const B = rows.length;
  const C = Math.ceil(V / chunk);
  const vec4 = V % 4 === 0 ? 1 : 0;
  const inputs = [
    floatArray('logits', logits),
    cArray('float', 'temp', rows.map((r) => r.t)),
    cArray('int', 'topk', rows.map((r) => r.k)),
    cArray('float', 'topp', rows.map((r) => r.p)),
    `alignas(16) static long long seeds[${B}] = {${rows.map((r) => `${r.seed}LL`).join(', ')}};`,
  ].join('\n');
  const run = (skipGreedy: number, body: string) => {
    const src = `#define FK_VEC4 ${vec4}\n#define FK_MT ${THREADS}\n#define FK_SKIP_GREEDY ${skipGreedy}\n${KERNEL_SOURCES['sampler.cu']!}`;
    const main = `${inputs}
alignas(16) static long long out[${B}];
alignas(16) static fk_u64 hist[${B * 4096}], part[${B * C}];
alignas(16) static FkRowState st[${B}];
int main() {
  for (int b = 0; b < ${B}; b++) out[b] = -1;
  ${body}
  for (int b = 0; b < ${B}; b++) printf("%lld\\n", out[b]);
}`;
    return runOnHost(`${SHIM}\n${src}`, main);
  };
  const max = `fk_launch_ctas(${C}, ${B}, ${THREADS}, [] { fk_ms_max(logits, ${V}, ${V}, ${chunk}, part, hist, st); });`;
  const multi = run(0, `${max}
  for (int stage = 0; stage < 6; stage++) fk_launch_ctas(${C}, ${B}, ${THREADS}, [stage] { fk_ms_hist(out, logits, ${V}, ${V}, ${chunk}, part, st, hist, temp, topk, topp, stage); });
  fk_launch_ctas(${C}, ${B}, ${THREADS}, [] { fk_ms_race(out, logits, ${V}, ${V}, ${chunk}, st, seeds, part); });`);
  const single = run(0, `fk_launch_ctas(${B}, 1, ${THREADS}, [] { fk_sample(out, logits, ${V}, ${V}, temp, topk, topp, seeds); });`);
  const split = run(1, `${max}
  fk_launch_ctas(${B}, 1, 32, [] { fk_ms_init(out, logits, ${V}, ${V}, ${C}, part, st, temp, topk, topp); });
  fk_launch_ctas(${B}, 1, ${THREADS}, [] { fk_sample(out, logits, ${V}, ${V}, temp, topk, topp, seeds); });`);
  return { multi, single, split };
}

describe.skipIf(!hasGxx)('sampler.cu on the host (g++ replay)', () => {
  for (const [V, chunk] of [[3001, 1024], [2048, 512]] as const) {
    it(`B24 x V${V} (${V % 4 ? 'scalar loads' : 'float4 loads'}, slices of ${chunk}): multi-CTA = fk_sample = greedy split = the CPU backend`, { timeout: 120_000 }, () => {
      const rng = new Rng(V);
      const B = 24;
      const rows = rowsFor(B, V, rng);
      const logits = logitsFor(B, V, rng);
      const cpu = new CpuBackend();
      const want = Array.from(
        cpu.ops
          .sample(
            Tensor.fromArray(cpu, logits, [B, V], 'f32'),
            Tensor.fromArray(cpu, rows.map((r) => r.t), [B], 'f32'),
            Tensor.fromArray(cpu, rows.map((r) => r.k), [B], 'i32'),
            Tensor.fromArray(cpu, rows.map((r) => r.p), [B], 'f32'),
            Tensor.fromArray(cpu, rows.map((r) => r.seed), [B], 'i64'),
          )
          .toFloat64Array(),
      );
      const got = hostTokens(logits, rows, V, chunk);
      expect(got.multi, 'multi-CTA vs CPU').toEqual(want);
      expect(got.single, 'fk_sample vs CPU').toEqual(want);
      expect(got.split, 'greedy split vs CPU').toEqual(want);
    });
  }
});
