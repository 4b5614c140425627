/**
 * Every gated-DeltaNet kernel variant the plans produce compiles with nvcc for sm_90a (what NVRTC builds at run time)
 * with no register spills. The delta rule: the three float dtypes at Qwen3-Next-80B's heads (HV 32, K 128, V 128) at
 * decode batch 1 and 256, with and without the in-kernel l2norm, f32 gates under bf16 inputs, i32 / i64 indices, the
 * largest K taken (1024), odd V (2-float and scalar state access). The conv: decode (128 channels a thread each) and
 * prefill (32 x 8) plans, every dtype, widths 1, 4 and 16, an f32 state pool under bf16 x, has_initial_state dtypes.
 * The chunked delta rule at Qwen3-Next's prefill plans (every dtype) and the odd shapes above; KDA's recurrent and chunked
 * variants at Kimi-Linear-48B's heads (every dtype) and the odd shapes. Skipped, saying so, without nvcc.
 */
import { compileSuite } from '../../../test/nvcc-compile.js';
import { gdnDecline, planConv, planGdn, type GdnShape } from './gdn-plan.js';
import { convSource, gdnSource, type ConvHasInitDType, type GdnDType, type GdnIndexDType } from './gdn-source.js';

const shapes: [string, GdnShape, number][] = [
  ['qwen3-next heads, 1 sequence', { N: 1, HV: 32, K: 128, V: 128 }, 4],
  ['qwen3-next heads, 256 sequences', { N: 256, HV: 32, K: 128, V: 128 }, 4],
  ['K 1024', { N: 2, HV: 2, K: 1024, V: 64 }, 4],
  ['V 10 (2-float access)', { N: 2, HV: 1, K: 40, V: 10 }, 4],
  ['V 12 unaligned state (scalar access)', { N: 3, HV: 2, K: 8, V: 12 }, 1],
];

const cases: [string, () => ReturnType<typeof gdnSource>][] = [];
for (const [label, shape, maxVec] of shapes) {
  const dtypes: GdnDType[] = label.startsWith('qwen3-next') ? ['bf16', 'f16', 'f32'] : ['bf16'];
  for (const dtype of dtypes) {
    for (const l2norm of label.startsWith('qwen3-next') ? [true, false] : [true]) {
      const idx: GdnIndexDType = dtype === 'f16' ? 'i64' : 'i32';
      const gDType: GdnDType = dtype === 'bf16' && !l2norm ? 'f32' : dtype;
      const p = planGdn(shape, maxVec, 132);
      cases.push([
        `gated delta rule ${label} ${dtype} (g ${gDType}${l2norm ? ', l2norm' : ''}; BV ${p.bv} x${p.vec}, ${p.threads} threads, ${idx} indices)`,
        () => gdnSource({ dtype, gDType, betaDType: dtype, cuDType: idx, idxDType: idx, K: shape.K, bv: p.bv, vec: p.vec, threads: p.threads, l2norm }),
      ]);
    }
  }
}
// the chunked kernel (chunk_gated_delta_rule): prefill plans at Qwen3-Next's heads, every dtype; odd shapes in bf16
for (const [label, shape, maxVec] of [['qwen3-next heads, 1 sequence', { N: 1, HV: 32, K: 128, V: 128 }, 4], ['qwen3-next heads, 8 sequences', { N: 8, HV: 32, K: 128, V: 128 }, 4], ...shapes.slice(2)] as [string, GdnShape, number][]) {
  const p = planGdn(shape, maxVec, 132, 'chunk');
  if (gdnDecline({ op: 'chunk_gated_delta_rule', dtypes: ['bf16', 'bf16', 'bf16'], H: 1, pool: null, ...shape })) continue;
  for (const dtype of label.startsWith('qwen3-next heads, 1') ? (['bf16', 'f16', 'f32'] as GdnDType[]) : (['bf16'] as GdnDType[])) {
    cases.push([
      `chunked gated delta rule ${label} ${dtype} (BV ${p.bv} x${p.vec}, ${p.threads} threads, chunk ${p.chunk}, ${p.sharedBytes} B shared)`,
      () => gdnSource({ kind: 'chunk', chunk: p.chunk, dtype, gDType: 'f32', betaDType: dtype, cuDType: 'i32', idxDType: 'i64', K: shape.K, bv: p.bv, vec: p.vec, threads: p.threads, l2norm: true }),
    ]);
  }
}
// KDA (fused_recurrent_kda / chunk_kda, a decay a key channel): Kimi-Linear-48B's heads (32 heads, K = V = 128) at decode
// batch 1 / 64 and its prefill plans, every dtype, f32 gates, i32 / i64 indices; the odd shapes in bf16
for (const [label, shape, maxVec] of [['kimi-linear heads, 1 sequence', { N: 1, HV: 32, K: 128, V: 128 }, 4], ['kimi-linear heads, 64 sequences', { N: 64, HV: 32, K: 128, V: 128 }, 4], ...shapes.slice(2)] as [string, GdnShape, number][]) {
  for (const kind of ['recurrent', 'chunk'] as const) {
    const op = kind === 'chunk' ? 'chunk_kda' : 'fused_recurrent_kda';
    if (gdnDecline({ op, dtypes: ['bf16', 'bf16', 'bf16'], H: 1, pool: null, ...shape })) continue;
    const p = planGdn(shape, maxVec, 132, kind, 'channel');
    for (const dtype of label.startsWith('kimi-linear heads, 1') ? (['bf16', 'f16', 'f32'] as GdnDType[]) : (['bf16'] as GdnDType[])) {
      const idx: GdnIndexDType = dtype === 'f16' ? 'i64' : 'i32';
      cases.push([
        `KDA ${kind} ${label} ${dtype} (g f32; BV ${p.bv} x${p.vec}, ${p.threads} threads${kind === 'chunk' ? `, chunk ${p.chunk}, ${p.sharedBytes} B shared` : ''}, ${idx} indices)`,
        () => gdnSource({ kind, gate: 'channel', chunk: p.chunk, dtype, gDType: 'f32', betaDType: dtype, cuDType: idx, idxDType: idx, K: shape.K, bv: p.bv, vec: p.vec, threads: p.threads, l2norm: true }),
      ]);
    }
  }
}
const convCases: [string, number, GdnDType, GdnDType, ConvHasInitDType, number][] = [
  ['decode', 1, 'bf16', 'f32', 'bool', 4],
  ['decode', 1, 'f16', 'f16', 'bool', 4],
  ['prefill', 256, 'bf16', 'f32', 'bool', 4],
  ['prefill', 256, 'f32', 'f32', 'i32', 4],
  ['prefill', 256, 'f16', 'bf16', 'i64', 16],
  ['decode', 1, 'bf16', 'bf16', 'u8', 1],
];
for (const [label, tokens, dtype, sDType, his, W] of convCases) {
  const p = planConv(64, 8192, tokens);
  cases.push([
    `causal conv ${label} ${dtype} (state ${sDType}, has_initial_state ${his}, width ${W}; ${p.ct} x ${p.tg} threads)`,
    () => convSource({ dtype, wDType: dtype, sInDType: sDType, sOutDType: sDType, cuDType: 'i32', idxDType: 'i32', hisDType: his, W, ct: p.ct, tg: p.tg, silu: true }),
  ]);
}

compileSuite('gated DeltaNet kernels (src/ops/recurrent/gdn-source.ts)', cases);
