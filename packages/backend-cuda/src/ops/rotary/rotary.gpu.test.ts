import type { DType } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G, checkTaskOnCuda, cosSinCpu, cpu, expectClose, gpu, intsCpu, poison, randCpu, task, taskCases, toGpu, tolOf, variant, withTuning } from '../../../test/spine-helpers.js';

const LLAMA31_ROPE_SCALING = { ropeType: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 };

describe('rotary_emb vs the float64 CPU backend', () => {
  const shapes = [
    // T, nq, nk, head, rot, neox
    [7, 32, 8, 128, 128, true],
    [5, 4, 2, 64, 32, true], // partial (neox)
    [5, 3, 1, 32, 16, false], // partial GPT-J
    [9, 2, 2, 24, 24, true], // half = 12: not a multiple of 8 (scalar path)
    [3, 4, 0, 80, 64, false], // query only
  ] as const;
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    for (const [T, nq, nk, hs, rot, neox] of shapes) {
      it(`${dtype} T=${T} nq=${nq} nk=${nk} head=${hs} rot=${rot} ${neox ? 'neox' : 'gptj'}`, G, () => {
        const maxPos = 64;
        const pos = intsCpu(Array.from({ length: T }, (_, i) => (i * 37 + 5) % maxPos), [T], T % 2 ? 'i64' : 'i32');
        const q = randCpu([T, nq * hs], dtype, T + hs);
        const k = nk ? randCpu([T, nk * hs], dtype, T + hs + 1) : null;
        const cache = cosSinCpu(maxPos, rot, dtype, 10000);
        poison(T * nq * hs, T * Math.max(nk, 1) * hs);
        const [gq, gk] = gpu().ops.rotaryEmbedding(toGpu(pos), toGpu(q), k ? toGpu(k) : null, toGpu(cache), hs, neox);
        const [eq, ek] = cpu().ops.rotaryEmbedding(pos, q, k, cache, hs, neox);
        expectClose(gq, eq, tolOf(dtype), 'query');
        if (k) expectClose(gk!, ek!, tolOf(dtype), 'key');
        else if (gk !== null) throw new Error('key should be null');
      });
    }
  }

  // blocks that stride over tokens (T above the grid: 264 blocks on 132 SMs, ~19 tokens each) load the next position a
  // token ahead; right against the CPU
  it('bf16 T=5000 (blocks stride over tokens, positions loaded a token ahead)', G, () => {
    const [T, nq, nk, hs, maxPos] = [5000, 4, 2, 64, 4096];
    const pos = intsCpu(Array.from({ length: T }, (_, i) => (i * 7919 + 3) % maxPos), [T], 'i64');
    const q = randCpu([T, nq * hs], 'bf16', 21);
    const k = randCpu([T, nk * hs], 'bf16', 22);
    const cache = cosSinCpu(maxPos, hs, 'bf16', 10000);
    const [eq, ek] = cpu().ops.rotaryEmbedding(pos, q, k, cache, hs, true);
    withTuning('rotary', { blocksPerSm: 2 }, () => {
      const [gq, gk] = gpu().ops.rotaryEmbedding(toGpu(pos), toGpu(q), toGpu(k), toGpu(cache), hs, true);
      expectClose(gq, eq, tolOf('bf16'), 'query');
      expectClose(gk!, ek!, tolOf('bf16'), 'key');
    });
  });

  it('query and key as slices of a fused QKV output, a rank-3 query, an f32 cache with bf16 activations', G, () => {
    const [T, nq, nk, hs] = [6, 8, 2, 64];
    const qkv = randCpu([T, (nq + 2 * nk) * hs], 'bf16', 3);
    const gqkv = toGpu(qkv);
    const pos = intsCpu([0, 5, 63, 2, 17, 1], [T], 'i64');
    const cache = cosSinCpu(64, hs, 'f32', 10000);
    const [gq, gk] = gpu().ops.rotaryEmbedding(toGpu(pos), gqkv.narrow(1, 0, nq * hs), gqkv.narrow(1, nq * hs, nk * hs), toGpu(cache), hs, true);
    const [eq, ek] = cpu().ops.rotaryEmbedding(pos, qkv.narrow(1, 0, nq * hs), qkv.narrow(1, nq * hs, nk * hs), cache, hs, true);
    expectClose(gq, eq, tolOf('bf16'), 'query slice');
    expectClose(gk!, ek!, tolOf('bf16'), 'key slice');
    const q3 = randCpu([T, nq, hs], 'f16', 4);
    const [g3] = gpu().ops.rotaryEmbedding(toGpu(pos), toGpu(q3), null, toGpu(cache), hs, false);
    const [e3] = cpu().ops.rotaryEmbedding(pos, q3, null, cache, hs, false);
    if (g3.shape.join() !== q3.shape.join()) throw new Error(`shape ${g3.shape}`);
    expectClose(g3, e3, tolOf('f16'), 'rank-3 query');
  });
});

describe('L1/rotary_emb task on CUDA vs its float64 reference', () => {
  const t = task('L1/rotary_emb');
  const b = t.cases.ci[0]!;
  const mk = (name: string, dtype: DType, T: number, NQ: number, NK: number, D: number, R: number, P: number, neox: boolean, extra: unknown[] = [], key = true) =>
    variant(b, name, { dtype, dims: { T, NQ, NK, D, R, P, HQ: NQ * D, HK: NK * D }, init: [D, R, P, 10000, neox, dtype, ...extra], options: key ? {} : { key: false } });
  const extra = [
    mk('llama-bf16', 'bf16', 33, 32, 8, 128, 128, 4096, true),
    mk('llama31-scaled-bf16', 'bf16', 5, 32, 8, 128, 128, 8192, true, [LLAMA31_ROPE_SCALING]),
    mk('gptj-f16-odd', 'f16', 11, 3, 1, 48, 40, 100, false),
    mk('neox-partial-f32-query-only', 'f32', 4, 5, 1, 72, 24, 50, true, [], false),
  ];
  for (const { c, seed } of taskCases(t, extra)) it(`${c.name} (${c.dtype}) seed ${seed}`, G, () => checkTaskOnCuda(t, c, seed));
});
