/**
 * Every GLA kernel variant the plans produce compiles with nvcc for sm_90a (what NVRTC builds at run time) with no
 * register spills: both kernels, the three float dtypes, i32 / i64 index tensors, GLA-2.7B's heads (K 256, V 512) at
 * decode batch 1 and 256 and at prefill, a 128-dim head, the largest K taken (1024), odd V (2-float and scalar state
 * access) and a one-warp CTA for tiny heads. Skipped, saying so, without nvcc.
 */
import { compileSuite } from '../../../test/nvcc-compile.js';
import { planGla, type GlaShape } from './gla-plan.js';
import { glaSource, type GlaDType, type GlaIndexDType } from './gla-source.js';

const shapes: [string, GlaShape, number][] = [
  ['gla-2.7b heads, 1 sequence', { N: 1, H: 5, K: 256, V: 512 }, 4],
  ['gla-2.7b heads, 256 sequences', { N: 256, H: 5, K: 256, V: 512 }, 4],
  ['head 128', { N: 8, H: 16, K: 128, V: 128 }, 4],
  ['K 1024', { N: 2, H: 2, K: 1024, V: 64 }, 4],
  ['V 10 (2-float access)', { N: 2, H: 1, K: 40, V: 10 }, 4],
  ['V 12 unaligned state (scalar access)', { N: 3, H: 2, K: 8, V: 12 }, 1],
];

const cases: [string, () => ReturnType<typeof glaSource>][] = [];
for (const kind of ['recurrent', 'chunk'] as const) {
  for (const [label, shape, maxVec] of shapes) {
    const dtypes: GlaDType[] = label.startsWith('gla-2.7b') ? ['bf16', 'f16', 'f32'] : ['bf16'];
    for (const dtype of dtypes) {
      const idx: GlaIndexDType = dtype === 'f16' ? 'i64' : 'i32';
      const p = planGla(kind, shape, maxVec, 132);
      cases.push([
        `${kind} ${label} ${dtype} (BV ${p.bv} x${p.vec}, ${p.threads} threads, ${idx} indices)`,
        () => glaSource({ kind, dtype, cuDType: idx, idxDType: idx, K: shape.K, bv: p.bv, vec: p.vec, threads: p.threads, chunk: p.chunk }),
      ]);
    }
  }
}

compileSuite('GLA kernels (src/ops/recurrent/gla-source.ts)', cases);
