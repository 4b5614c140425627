/**
 * moe_align on the GPU (kernels/moe_align.cu, one launch) against moe_align in plain loops (test/moe-routing.ts), entry
 * for entry: Mixtral (E 8, top-2), Qwen3-MoE (E 128, top-8), gpt-oss (E 32, top-4) at 1, 7, 64 and 4096 tokens with
 * -1 and out-of-range slots, i32 and i64 ids; a CUDA graph of the call replayed over new ids written into the same
 * buffer; and the kernel's device time beside the op's decomposition's (printed, for issue 31's routing figures).
 */
import { describe, expect, it } from 'vitest';
import { Rng, callOp, opRoute, type Tensor } from '@fastkernels/core';
import { G, checkGraphReplays, intsCpu, kernelVsDecomposition, releasing, toGpu } from '../../../test/spine-helpers.js';
import { alignRouting, randomRouting } from '../../../test/moe-routing.js';

const MODELS = [
  { name: 'Mixtral', E: 8, topK: 2 },
  { name: 'Qwen3-MoE', E: 128, topK: 8 },
  { name: 'gpt-oss', E: 32, topK: 4 },
];
const blockSizeOf = (T: number) => (T <= 64 ? 16 : 64);

function idsOf(rng: Rng, T: number, E: number, topK: number): number[] {
  const ids = randomRouting(rng, T, E, topK);
  for (let s = 5; s < ids.length; s += 11) ids[s] = -1;
  if (ids.length > 3) ids[3] = E + 2;
  return ids;
}

function expectAligned(outs: Tensor[], ids: number[], E: number, bs: number, label: string): void {
  const want = alignRouting(ids, E, bs);
  expect(Array.from(outs[2]!.toFloat64Array()), `${label}: post`).toEqual([want.post]);
  expect(Array.from(outs[0]!.toFloat64Array()), `${label}: sorted`).toEqual(want.sorted);
  expect(Array.from(outs[1]!.toFloat64Array()), `${label}: experts`).toEqual(want.experts);
}

describe('moe_align on CUDA = the loops', () => {
  for (const m of MODELS) {
    it(`${m.name} (E ${m.E}, top-${m.topK}) at T 1, 7, 64, 4096, i32 and i64 ids`, G, () => {
      releasing((keep) => {
        const rng = new Rng(40 + m.E);
        for (const T of [1, 7, 64, 4096]) {
          for (const dtype of ['i32', 'i64'] as const) {
            const ids = idsOf(rng, T, m.E, m.topK);
            const g = keep(toGpu(keep(intsCpu(ids, [T, m.topK], dtype))));
            const attrs = { block_size: blockSizeOf(T), num_experts: m.E };
            expect(opRoute('moe_align', [g], attrs)).toEqual({ via: 'kernel' });
            expectAligned(keep(callOp('moe_align', [g], attrs)), ids, m.E, attrs.block_size, `${m.name} T ${T} ${dtype}`);
          }
        }
      });
    });
  }

  it('a CUDA graph of the call: replays over new ids = the loops', G, () => {
    releasing((keep) => {
      const [T, E, topK, bs] = [64, 128, 8, 16];
      const rng = new Rng(5);
      const ids = keep(toGpu(keep(intsCpu(idsOf(rng, T, E, topK), [T, topK], 'i32'))));
      checkGraphReplays(keep, 'moe_align', ids, { block_size: bs, num_experts: E }, 2, (r) => {
        const next = idsOf(rng, T, E, topK);
        return { values: keep(intsCpu(next, [T, topK], 'i32')), check: (outs) => expectAligned(outs, next, E, bs, `replay ${r}`) };
      });
    });
  });

  it('device time in a graph: the kernel vs the decomposition (printed)', G, () => {
    releasing((keep) => {
      for (const m of MODELS) {
        for (const T of [1, 64, 4096]) {
          const ids = keep(toGpu(keep(intsCpu(idsOf(new Rng(T), T, m.E, m.topK), [T, m.topK], 'i32'))));
          const times = kernelVsDecomposition('moe_align', [ids], { block_size: blockSizeOf(T), num_experts: m.E });
          console.log(`moe_align ${m.name} T ${T}: ${times} (graph replays, H100 / H200: say which)`);
        }
      }
    });
  });
});
