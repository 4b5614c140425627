/**
 * Every build of the tensor-core chunk_gla (kernels/gla_chunk_tc.cu) the plans produce compiles with nvcc for sm_90a
 * (what NVRTC builds at run time) with no register spills, both entries: GLA-2.7B's heads at one 4096-token sequence
 * (BV 32) and at many sequences (BV 64), bf16 and f16, i32 and i64 index tensors, a 128-dim head, and the small heads
 * of the host replay (K 32: two warps across K, 32-channel slabs). Skipped, saying so, without nvcc.
 */
import { compileSuite } from '../../../test/nvcc-compile.js';
import { glaTcDefines, planGlaTc, type GlaTcShape } from './gla-tc-plan.js';
import { glaTcSource } from './gla-tc.js';

const shapes: [string, GlaTcShape][] = [
  ['gla-2.7b heads, one 4096-token sequence', { N: 1, T: 4096, H: 5, K: 256, V: 512, varlen: false }],
  ['gla-2.7b heads, 64 packed sequences', { N: 64, T: 8192, H: 5, K: 256, V: 512, varlen: true }],
  ['head 128', { N: 2, T: 1024, H: 16, K: 128, V: 128, varlen: false }],
  ['K 32 / V 48 (host replay)', { N: 3, T: 150, H: 2, K: 32, V: 48, varlen: true }],
];

const cases: [string, () => ReturnType<typeof glaTcSource>][] = [];
for (const [label, shape] of shapes) {
  for (const dtype of label.startsWith('gla-2.7b') ? (['bf16', 'f16'] as const) : (['bf16'] as const)) {
    const idx = dtype === 'f16' ? 'i64' : 'i32';
    const p = planGlaTc(shape, 132);
    for (const entry of ['fk_gla_chunk_prep', 'fk_gla_chunk_tc'] as const) {
      cases.push([`${entry} ${label} ${dtype} (BV ${p.bv}, WK ${p.wk}, slab ${p.ks}, ${idx} indices)`, () => glaTcSource(entry, glaTcDefines(dtype, shape.K, p, idx, idx))]);
    }
  }
}

compileSuite('tensor-core chunk_gla (kernels/gla_chunk_tc.cu)', cases);
