/**
 * Runs a generated CUDA kernel's source on the host with g++ (for the f32 variants, which need no cuda_fp16 / cuda_bf16):
 * the CUDA built-ins a simple kernel uses are declared in C++ (qualifiers as nothing, vector types, __int_as_float),
 * each CTA's threads are std::threads with their own threadIdx / blockIdx, and __shfl_xor_sync exchanges values through
 * a per-warp array between two barriers of the warp's 32 threads (so a kernel must leave a warp's shuffles all together
 * or not at all, as the generated grouped GEMMs do). The caller writes main(): its inputs as static arrays, `fk_launch`
 * with the grid and block, and the outputs printed one a line. Skipped where g++ is absent.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const hasGxx = (() => {
  try {
    execFileSync('g++', ['--version'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
})();

const PRELUDE = `#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__
struct fk_dim3 { unsigned x = 0, y = 0, z = 0; };
thread_local fk_dim3 threadIdx, blockIdx;
fk_dim3 blockDim, gridDim;
struct uint4 { unsigned x, y, z, w; };
struct float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
struct fk_warp { std::barrier<> bar{32}; float vals[32]; };
thread_local fk_warp* fk_this_warp;
inline float __shfl_xor_sync(unsigned, float v, int o) {
  const unsigned lane = threadIdx.x & 31u;
  fk_this_warp->vals[lane] = v;
  fk_this_warp->bar.arrive_and_wait();
  const float r = fk_this_warp->vals[lane ^ (unsigned)o];
  fk_this_warp->bar.arrive_and_wait();
  return r;
}
// every CTA of the grid, one after another; a CTA's threads at once (blocks of whole warps)
inline void fk_launch(fk_dim3 grid, unsigned threads, const std::function<void()>& kernel) {
  gridDim = grid;
  blockDim = {threads, 1, 1};
  for (unsigned bz = 0; bz < std::max(1u, grid.z); bz++)
    for (unsigned by = 0; by < std::max(1u, grid.y); by++)
      for (unsigned bx = 0; bx < grid.x; bx++) {
        std::vector<std::unique_ptr<fk_warp>> warps;
        for (unsigned w = 0; w < threads / 32; w++) warps.push_back(std::make_unique<fk_warp>());
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < threads; t++)
          ts.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            blockIdx = {bx, by, bz};
            fk_this_warp = warps[t / 32].get();
            kernel();
          });
        for (auto& th : ts) th.join();
      }
}
`;

/**
 * For kernels with __syncthreads / __shared__ (prepend to the source): a CTA-wide barrier, static shared memory, a 2-d
 * grid of any block (fk_launch_ctas) with the warps' shuffle slots; a thread that returns leaves the CTA barrier, as
 * on the GPU (a kernel whose threads exit early still meets its later barriers).
 */
export const CTA_SHIM = `#define __shared__ static
std::barrier<>* fk_cta_bar;
inline void __syncthreads() { fk_cta_bar->arrive_and_wait(); }
inline void fk_launch_ctas(unsigned gx, unsigned gy, unsigned threads, const std::function<void()>& kernel) {
  gridDim = {gx, gy, 1};
  blockDim = {threads, 1, 1};
  for (unsigned by = 0; by < gy; by++)
    for (unsigned bx = 0; bx < gx; bx++) {
      std::barrier<> bar(threads);
      fk_cta_bar = &bar;
      std::vector<std::unique_ptr<fk_warp>> warps;
      for (unsigned w = 0; w < (threads + 31) / 32; w++) warps.push_back(std::make_unique<fk_warp>());
      std::vector<std::thread> ts;
      for (unsigned t = 0; t < threads; t++)
        ts.emplace_back([&, t] {
          threadIdx = {t, 0, 0};
          blockIdx = {bx, by, 0};
          fk_this_warp = warps[t / 32].get();
          kernel();
          bar.arrive_and_drop();
        });
      for (auto& th : ts) th.join();
    }
}
`;

/**
 * Warp exchanges of any value up to 8 bytes (ints for fk_warp_scan.cuh's scans, votes, the sampler's keys): each lane
 * deposits its value in its warp's slot row, the warp meets at its barrier, each lane reads the lane it asked for, and a
 * second barrier frees the row. __shfl_sync, __shfl_up_sync, __shfl_xor_sync (beside the prelude's float one),
 * __ballot_sync and __match_any_sync; a CTA of up to 1024 threads (one CTA at a time, as the launchers here run them).
 */
export const WARP_LANES_SHIM = `#include <cstdint>
static unsigned long long fk_lane_slots[32][32];
template <class X> X fk_from_lane(X v, unsigned src) {
  const unsigned lane = threadIdx.x & 31u, w = threadIdx.x >> 5;
  unsigned long long u = 0;
  std::memcpy(&u, &v, sizeof(X));
  fk_lane_slots[w][lane] = u;
  fk_this_warp->bar.arrive_and_wait();
  const unsigned long long r = fk_lane_slots[w][src & 31u];
  fk_this_warp->bar.arrive_and_wait();
  X out;
  std::memcpy(&out, &r, sizeof(X));
  return out;
}
template <class X> X __shfl_sync(unsigned, X v, int src) { return fk_from_lane(v, (unsigned)src); }
template <class X> X __shfl_up_sync(unsigned, X v, unsigned d) { const unsigned lane = threadIdx.x & 31u; return fk_from_lane(v, lane >= d ? lane - d : lane); }
template <class X> X __shfl_xor_sync(unsigned, X v, int o) { return fk_from_lane(v, (threadIdx.x & 31u) ^ (unsigned)o); }
// the lanes whose value satisfies keep(lane's value), as one mask, seen by every lane
template <class Keep> unsigned fk_lane_mask(unsigned long long mine, Keep keep) {
  const unsigned w = threadIdx.x >> 5;
  fk_lane_slots[w][threadIdx.x & 31u] = mine;
  fk_this_warp->bar.arrive_and_wait();
  unsigned m = 0;
  for (int i = 0; i < 32; i++) if (keep(fk_lane_slots[w][i])) m |= 1u << i;
  fk_this_warp->bar.arrive_and_wait();
  return m;
}
inline unsigned __ballot_sync(unsigned, bool p) { return fk_lane_mask(p ? 1 : 0, [](unsigned long long x) { return x != 0; }); }
inline unsigned __match_any_sync(unsigned, int v) {
  const unsigned long long mine = (unsigned)v;
  return fk_lane_mask(mine, [mine](unsigned long long x) { return x == mine; });
}
`;

/** A C++ array initialiser of numbers (floats printed round-trip exact). */
export function cArray(type: string, name: string, values: ArrayLike<number>): string {
  const items = Array.from(values, (v) => (type === 'float' ? `${Number.isNaN(v) ? 'NAN' : Math.fround(v).toPrecision(9)}f` : String(v)));
  return `alignas(16) static ${type} ${name}[${Math.max(1, items.length)}] = {${items.join(', ') || '0'}};`;
}

/** Compiles kernel source + main with the prelude, runs it, and returns the numbers it printed (one a line). */
export function runOnHost(kernelSource: string, main: string): number[] {
  const dir = mkdtempSync(join(tmpdir(), 'fk-host-cuda-'));
  try {
    const file = join(dir, 'k.cpp');
    writeFileSync(file, `${PRELUDE}\n${kernelSource}\n${main}\n`);
    const exe = join(dir, 'k');
    const c = spawnSync('g++', ['-std=c++20', '-O1', '-pthread', '-w', file, '-o', exe], { encoding: 'utf8' });
    if (c.status !== 0) throw new Error(`g++ failed:\n${c.stderr}`);
    const r = spawnSync(exe, [], { encoding: 'utf8', maxBuffer: 64 << 20 });
    if (r.status !== 0) throw new Error(`the host run failed (${r.status}):\n${r.stderr}`);
    // printf's inf / -inf / nan spellings
    return r.stdout.trim().split('\n').filter((l) => l.length).map((l) => (/^-?inf/i.test(l) ? (l.startsWith('-') ? -Infinity : Infinity) : /nan/i.test(l) ? NaN : Number(l)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
