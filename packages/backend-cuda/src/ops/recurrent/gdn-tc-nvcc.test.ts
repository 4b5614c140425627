/**
 * Every build of the tensor-core chunk_gated_delta_rule (kernels/gdn_chunk_tc.cu) the plans produce compiles with nvcc
 * for sm_90a (what NVRTC builds at run time) with no register spills, both entries: Qwen3-Next's heads at one
 * 4096-token sequence (BV 32, 4 warps across K) and at many packed sequences (BV 64), bf16 and f16, f32 / bf16 / f16
 * gates, l2norm on and off, i32 and i64 index tensors, K 192 and 256, and the small heads of the host replay (K 32: two warps across
 * K; K 64). Skipped, saying so, without nvcc.
 */
import { compileSuite } from '../../../test/nvcc-compile.js';
import { gdnTcDefines, planGdnTc, type GdnTcShape } from './gdn-tc-plan.js';
import { gdnTcSource } from './gdn-tc.js';

type Build = { dtypes: [string, string, string]; l2norm: boolean; idx: 'i32' | 'i64' };
const shapes: [string, GdnTcShape, Build[]][] = [
  ['qwen3-next heads, one 4096-token sequence', { N: 1, T: 4096, H: 16, HV: 32, K: 128, V: 128, varlen: false }, [
    { dtypes: ['bf16', 'f32', 'bf16'], l2norm: true, idx: 'i32' },
    { dtypes: ['f16', 'f16', 'f16'], l2norm: false, idx: 'i64' },
  ]],
  ['qwen3-next heads, 64 packed sequences', { N: 64, T: 8192, H: 16, HV: 32, K: 128, V: 128, varlen: true }, [{ dtypes: ['bf16', 'bf16', 'f32'], l2norm: true, idx: 'i64' }]],
  ['K 192 (4 warps of 48 key columns)', { N: 1, T: 1024, H: 4, HV: 8, K: 192, V: 128, varlen: false }, [{ dtypes: ['bf16', 'f32', 'bf16'], l2norm: true, idx: 'i32' }]],
  ['K 256, many sequences (BV 32: the widest that fits)', { N: 64, T: 8192, H: 16, HV: 32, K: 256, V: 128, varlen: true }, [{ dtypes: ['bf16', 'f32', 'bf16'], l2norm: true, idx: 'i32' }]],
  ['K 256 / V 32 (host replay)', { N: 1, T: 70, H: 1, HV: 1, K: 256, V: 32, varlen: false }, [{ dtypes: ['bf16', 'f32', 'bf16'], l2norm: true, idx: 'i32' }]],
  ['K 32 / V 48 (host replay)', { N: 3, T: 151, H: 1, HV: 2, K: 32, V: 48, varlen: true }, [{ dtypes: ['bf16', 'f32', 'bf16'], l2norm: false, idx: 'i32' }]],
  ['K 64 / V 32 (host replay)', { N: 1, T: 130, H: 1, HV: 2, K: 64, V: 32, varlen: false }, [{ dtypes: ['bf16', 'f32', 'bf16'], l2norm: true, idx: 'i32' }]],
];

const cases: [string, () => ReturnType<typeof gdnTcSource>][] = [];
for (const [label, shape, builds] of shapes) {
  const p = planGdnTc(shape, 132);
  for (const b of builds) {
    for (const entry of ['fk_gdn_chunk_prep', 'fk_gdn_chunk_tc'] as const) {
      cases.push([
        `${entry} ${label} ${b.dtypes.join('/')} l2norm ${b.l2norm ? 'on' : 'off'} (BV ${p.bv}, WK ${p.wk}, ${b.idx} indices)`,
        () => gdnTcSource(entry, gdnTcDefines(b.dtypes, shape.K, shape.V, p, b.l2norm, b.idx, b.idx)),
      ]);
    }
  }
}

compileSuite('tensor-core chunk_gated_delta_rule (kernels/gdn_chunk_tc.cu)', cases);
