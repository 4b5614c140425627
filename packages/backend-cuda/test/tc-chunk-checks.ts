/**
 * What the tensor-core chunked kernels' tests share (gla_chunk_tc.cu, gdn_chunk_tc.cu): bf16 rounding for the host
 * replays' inputs and the replay's main() around the two launches (gla-tc-host, gdn-tc-host), how the replays hold o and
 * the states to the float64 CPU op and check a pool's untouched rows, and the fake devices the plan tests route calls on
 * (gla-tc-plan, gdn-tc-plan).
 */
import { expect } from 'vitest';
import { KERNEL_SOURCES } from '../src/kernel-sources.generated.js';
import { registerRecurrentKernels } from '../src/ops/recurrent/register.js';
import type { CudaRuntime } from '../src/runtime.js';
import { cArray, runOnHost } from './host-cuda.js';
import { fake } from './ops-fake.js';
import { warpMmaHostShim } from './warp-mma-host.js';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
/** bf16 round-to-nearest-even: its bits, and the value as a float. */
export function bf16Bits(x: number): number {
  f32[0] = x;
  return ((u32[0]! + 0x7fff + ((u32[0]! >> 16) & 1)) >>> 16) & 0xffff;
}
export function bf16(x: number): number {
  u32[0] = bf16Bits(x) << 16;
  return f32[0]!;
}

/** What one host replay of a kernel pair's two launches (the prep, then the walk) takes. */
export interface PrepWalkReplay {
  /** The kernel file (KERNEL_SOURCES, as embedded), its #defines and namespace (the shim's stand-ins go in it). */
  readonly file: string;
  readonly defines: Record<string, string | number>;
  readonly namespace: string;
  /** C declarations of the inputs, the workspaces and o_ (bf16 bits, o's length). */
  readonly arrays: string;
  readonly oLen: number;
  /** The initial states or the pool (s_in), cu_seqlens (cu) and the pool rows (si), where given; the state's length. */
  readonly s0: Float64Array | null;
  readonly cu?: readonly number[];
  readonly idx?: readonly number[];
  readonly stateLen: number;
  /** The launches: grids, threads, and the calls (cup, sip, sin_, sout and BF() in scope). */
  readonly prep: ReplayLaunch;
  readonly walk: ReplayLaunch;
}

/** One launch of a replay: grid, threads, its planned dynamic shared memory (bytes) and the call. */
export interface ReplayLaunch {
  readonly grid: readonly number[];
  readonly threads: number;
  readonly shared: number;
  readonly call: string;
}

/** Runs both launches on the host; returns o and the state array after (the final states, or the pool in place). */
export function replayPrepWalk(r: PrepWalkReplay): { o: number[]; state: number[] } {
  const pooled = r.idx !== undefined;
  const source = `#define FK_HOST_REPLAY 1\n${Object.entries(r.defines).map(([k, v]) => `#define ${k} ${v}`).join('\n')}\n${KERNEL_SOURCES[r.file]!}`;
  const main = `${r.arrays}
${cArray('float', 's_in', r.s0 ?? [0])}
${cArray('int', 'cu', r.cu ?? [0])}
${cArray('int', 'si', r.idx ?? [0])}
static float s_out[${r.stateLen}];
#define BF(a) reinterpret_cast<__nv_bfloat16*>(a)
int main() {
  const int* cup = ${r.cu ? 'cu' : 'nullptr'};
  const int* sip = ${pooled ? 'si' : 'nullptr'};
  float* sin_ = ${pooled || r.s0 ? 's_in' : 'nullptr'};
  float* sout = ${pooled ? 's_in' : 's_out'};
  fk_cta_threads(${r.prep.threads});
  fk_smem_poison(${r.prep.shared});
  fk_launch({${r.prep.grid.join(', ')}}, ${r.prep.threads}, [&] { ${r.prep.call}; });
  printf("%ld\\n", fk_smem_overrun(${r.prep.shared}));
  fk_cta_threads(${r.walk.threads});
  fk_smem_poison(${r.walk.shared});
  fk_launch({${r.walk.grid.join(', ')}}, ${r.walk.threads}, [&] { ${r.walk.call}; });
  printf("%ld\\n", fk_smem_overrun(${r.walk.shared}));
  for (int i = 0; i < ${r.oLen}; i++) printf("%.9g\\n", fk_bf16_float(o_[i]));
  const float* s = ${pooled ? 's_in' : 's_out'};
  for (int i = 0; i < ${r.stateLen}; i++) printf("%.9g\\n", s[i]);
}`;
  const out = runOnHost(`${warpMmaHostShim(r.namespace, r.prep.threads)}\n${source}`, main);
  // bytes written past each launch's planned shared memory: on a GPU an illegal address
  expect(out.slice(0, 2), `${r.file}: shared memory written past the plan (prep, walk)`).toEqual([0, 0]);
  return { o: out.slice(2, 2 + r.oLen), state: out.slice(2 + r.oLen) };
}

/** max |got - want| over max |want|: the error relative to the output's scale. */
export function scaledError(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let err = 0;
  let mag = 0;
  for (let i = 0; i < want.length; i++) {
    err = Math.max(err, Math.abs(got[i]! - want[i]!));
    mag = Math.max(mag, Math.abs(want[i]!));
  }
  return mag === 0 ? err : err / mag;
}

/**
 * got within the tolerances the GPU tests and the L1 task hold the CUDA-core kernels to (compareTensors: 99% of the
 * elements within atol + rtol |want|, none past 8x).
 */
export function expectWithin(got: ArrayLike<number>, want: Float64Array, atol: number, rtol: number, what: string): void {
  let matched = 0;
  let worst = 0;
  want.forEach((w, i) => {
    const r = Math.abs(got[i]! - w) / (atol + rtol * Math.abs(w));
    if (r <= 1) matched++;
    worst = Math.max(worst, r);
  });
  expect(matched / want.length, `${what}: matched`).toBeGreaterThanOrEqual(0.99);
  expect(worst, `${what}: worst error / tolerance`).toBeLessThanOrEqual(8);
}

/** The pool rows (of `per` floats) no live sequence names, the -1 row's too, are as they were (printed with 9 digits: the float again). */
export function expectUntouchedRows(state: readonly number[], before: Float64Array, idx: readonly number[], slots: number, per: number): void {
  for (let sl = 0; sl < slots; sl++) {
    if (idx.includes(sl)) continue;
    const moved = state.slice(sl * per, (sl + 1) * per).findIndex((z, i) => Math.fround(z) !== Math.fround(before[sl * per + i]!));
    expect(moved, moved < 0 ? '' : `pool row ${sl} [${moved}]: ${state[sl * per + moved]} vs ${before[sl * per + moved]}`).toBe(-1);
  }
}

/** A fake device (132 SMs of sm_90 unless given) with the recurrent kernels registered. */
export function recurrentDevice(props: { multiprocessors?: number; major?: number; sharedPerBlockOptin?: number } = {}) {
  const f = fake();
  const runtime = (() => ({ properties: () => ({ multiprocessors: 132, major: 9, ...props }) })) as unknown as () => CudaRuntime;
  registerRecurrentKernels(f.backend.opKernels!, f.cache, runtime);
  return f;
}

/** The two launches a tensor-core route records: the prep, then the walk. */
export function prepAndWalk(f: ReturnType<typeof fake>) {
  return f.cache.launches as [(typeof f.cache.launches)[0], (typeof f.cache.launches)[0]];
}
