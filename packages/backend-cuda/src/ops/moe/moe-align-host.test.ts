/**
 * kernels/moe_align.cu run on the host (test/host-cuda.ts: g++, one CTA's 1024 threads as std::threads, warp shuffles
 * and __match_any_sync through per-warp arrays) with the launcher's arguments (moe-align-plan.ts), against moe_align in
 * plain loops (test/moe-routing.ts) and the op's decomposition on the CPU backend, entry for entry: Mixtral (E 8, top-2),
 * Qwen3-MoE (E 128, top-8), gpt-oss (E 32, top-4) and E 64 top-8 (the GPU test's shape that found a shared-memory overrun) at 1, 7, 64 and 4096 tokens (vLLM's block sizes 16 / 64), some
 * slots -1 (another rank's expert) or past E, and experts never hit; plus E 1000 (fewer counting warps than 32).
 * Every launch also checks that the kernel stays inside the plan's dynamic shared memory (a canary past it).
 * What this cannot see: real warp divergence, timing. Skipped where g++ is absent.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor, callOp } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { alignRouting, randomRouting } from '../../../test/moe-routing.js';
import { WARP_LANES_SHIM, cArray, hasGxx, runOnHost } from '../../../test/host-cuda.js';
import { moeAlignSource } from './moe-align.js';
import { MOE_ALIGN_THREADS, planMoeAlign } from './moe-align-plan.js';

const cpu = new CpuBackend();

/** The built-ins the kernel uses beyond host-cuda.ts's, for one CTA of MOE_ALIGN_THREADS threads. */
const ALIGN_SHIM = `#include <algorithm>
#define __shared__
using std::min;
using std::max;
std::barrier<> fk_cta_barrier(${MOE_ALIGN_THREADS});
inline void __syncthreads() { fk_cta_barrier.arrive_and_wait(); }
inline void __syncwarp() { fk_this_warp->bar.arrive_and_wait(); }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
${WARP_LANES_SHIM}
static int fk_align_smem[1 << 14];
// the launch's dynamic shared memory is the plan's bytes: the rest of the array holds a canary the kernel must not touch
constexpr int FK_CANARY = 0x5a5a5a5a;
inline int fk_smem_overrun(int planned) {
  int n = 0;
  for (int i = planned; i < (1 << 14); i++) n += fk_align_smem[i] != FK_CANARY;
  return n;
}
`;

interface AlignCase {
  readonly name: string;
  readonly T: number;
  readonly E: number;
  readonly topK: number;
}

const MODELS = [
  { name: 'Mixtral', E: 8, topK: 2 },
  { name: 'Qwen3-MoE', E: 128, topK: 8 },
  { name: 'gpt-oss', E: 32, topK: 4 },
  { name: 'E 64 top-8', E: 64, topK: 8 },
];
const blockSizeOf = (T: number) => (T <= 64 ? 16 : 64); // vLLM's tuned BLOCK_SIZE_M

/** Top-k ids with every 11th slot -1 and one slot past E (both in no block). */
function idsOf(c: AlignCase, rng: Rng): number[] {
  const ids = randomRouting(rng, c.T, c.E, c.topK);
  for (let s = 5; s < ids.length; s += 11) ids[s] = -1;
  if (ids.length > 3) ids[3] = c.E + 2;
  return ids;
}

/** sorted, experts and post as the kernel writes them for each case, one g++ build for the lot. */
function runKernel(cases: readonly { c: AlignCase; ids: number[]; bs: number; P: number }[]): { sorted: number[]; experts: number[]; post: number }[] {
  const src = moeAlignSource('i32').source;
  let body = '';
  let decls = '';
  cases.forEach(({ c, ids, bs, P }, i) => {
    const plan = planMoeAlign(c.E)!;
    expect(plan.smemBytes).toBeLessThanOrEqual(4 * (1 << 14));
    decls += `${cArray('int', `ids${i}`, ids)}\nstatic int sorted${i}[${P}], experts${i}[${P / bs}], post${i}[1];\n`;
    // poison the outputs: every entry must be written
    body += `  std::fill_n(sorted${i}, ${P}, -7); std::fill_n(experts${i}, ${P / bs}, -7); post${i}[0] = -7;
  std::fill_n(fk_align_smem, 1 << 14, FK_CANARY);
  fk_launch({1, 1, 1}, ${MOE_ALIGN_THREADS}, [] { fk_moe_align(ids${i}, sorted${i}, experts${i}, post${i}, ${ids.length}, ${c.E}, ${bs}, ${P}, ${plan.countWarps}); });
  printf("%d\\n", fk_smem_overrun(${plan.smemBytes / 4}));
  for (int i = 0; i < ${P}; i++) printf("%d\\n", sorted${i}[i]);
  for (int i = 0; i < ${P / bs}; i++) printf("%d\\n", experts${i}[i]);
  printf("%d\\n", post${i}[0]);
`;
  });
  const out = runOnHost(`${ALIGN_SHIM}\n${src}`, `${decls}int main() {\n${body}}`);
  let at = 0;
  return cases.map(({ c, bs, P }) => {
    // ints written past the planned shared memory: on a GPU an illegal address (E 64 found it: the plan had E - 1 ints too few)
    expect(out[at++], `${c.name} T ${c.T}: shared memory written past the plan's bytes`).toBe(0);
    const sorted = out.slice(at, (at += P));
    const experts = out.slice(at, (at += P / bs));
    return { sorted, experts, post: out[at++]! };
  });
}

function expectAligned(c: AlignCase, ids: number[], bs: number, got: { sorted: number[]; experts: number[]; post: number }): void {
  const want = alignRouting(ids, c.E, bs);
  expect(got.post, `${c.name}: padded total`).toBe(want.post);
  expect(got.sorted, `${c.name}: sorted_token_ids`).toEqual(want.sorted);
  expect(got.experts, `${c.name}: expert_ids`).toEqual(want.experts);
  // the op's decomposition on the CPU backend: the same layout
  const t = Tensor.fromArray(cpu, ids, [c.T, c.topK], 'i32');
  const [sorted, experts, post] = callOp('moe_align', [t], { block_size: bs, num_experts: c.E });
  expect(Array.from(sorted!.toFloat64Array()), `${c.name}: decomposition`).toEqual(want.sorted);
  expect(Array.from(experts!.toFloat64Array())).toEqual(want.experts);
  expect(post!.toFloat64Array()[0]).toBe(want.post);
  for (const x of [t, sorted, experts, post]) x!.dispose();
}

describe(`moe_align's kernel on the host${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  for (const m of MODELS) {
    it.skipIf(!hasGxx)(`${m.name} (E ${m.E}, top-${m.topK}) at T = 1, 7, 64, 4096 with -1 and out-of-range slots = the loops and the decomposition`, () => {
      const rng = new Rng(31 + m.E);
      const cases = [1, 7, 64, 4096].map((T) => {
        const c = { ...m, T };
        const ids = idsOf(c, rng);
        const bs = blockSizeOf(T);
        const P = Math.ceil((ids.length + c.E * (bs - 1)) / bs) * bs;
        return { c, ids, bs, P };
      });
      const got = runKernel(cases);
      cases.forEach((k, i) => expectAligned(k.c, k.ids, k.bs, got[i]!));
    }, 300_000);
  }

  it.skipIf(!hasGxx)('E 1000, top-8, 300 tokens: fewer counting warps (shared memory), block size 4', () => {
    const c = { name: 'E 1000', E: 1000, topK: 8, T: 300 };
    expect(planMoeAlign(c.E)!.countWarps).toBeLessThan(32);
    const ids = idsOf(c, new Rng(7));
    const bs = 4;
    const P = Math.ceil((ids.length + c.E * (bs - 1)) / bs) * bs;
    expectAligned(c, ids, bs, runKernel([{ c, ids, bs, P }])[0]!);
  }, 300_000);
});
