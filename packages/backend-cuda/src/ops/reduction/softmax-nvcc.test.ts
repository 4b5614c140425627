/**
 * softmax.cu with the defines reduction/softmax.ts passes compiles for sm_90a with no register spills (ptxas -v; every
 * kernel of the file, fk_softmax_smem included), skipped, saying so, where nvcc is absent: softmax and log_softmax, the
 * output in another dtype, 16-byte and scalar vectors, each cluster size, PDL on.
 */
import { compileSuite } from '../../../test/nvcc-compile.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import type { GeneratedKernel } from '../elementwise-source.js';

const BF = '__nv_bfloat16';
/** softmax.cu as NVRTC gets it, the -D options of a launch as #defines first. */
const build = (defines: Record<string, string | number>): (() => GeneratedKernel) => () => ({
  source: [...Object.entries(defines).map(([k, v]) => `#define ${k} ${v}`), KERNEL_SOURCES['softmax.cu']!].join('\n'),
  entry: 'fk_softmax_smem',
  signature: ['ptr', 'ptr', 'i32', 'i32', 'i64'],
});

const cases: [string, () => GeneratedKernel][] = [];
for (const [T, vec] of [[BF, 8], ['__half', 8], ['float', 4]] as const) {
  for (const cs of [2, 4, 8]) {
    cases.push([`log_softmax ${T} vec ${vec} cluster ${cs}`, build({ FK_T: T, FK_VEC: vec, FK_NPT: 4, FK_CS: cs, FK_LOG: 1 })]);
  }
  cases.push([`softmax ${T} vec ${vec} cluster 8`, build({ FK_T: T, FK_VEC: vec, FK_NPT: 4, FK_CS: 8 })]);
  cases.push([`softmax ${T} scalar -> f32 cluster 8`, build({ FK_T: T, FK_VEC: 1, FK_NPT: 4, FK_CS: 8, FK_OT: 'float' })]);
}
cases.push(['softmax bf16 -> f32 vec 8 (32-byte output vectors), 8 kept a thread', build({ FK_T: BF, FK_VEC: 8, FK_NPT: 8, FK_CS: 8, FK_OT: 'float' })]);
cases.push(['log_softmax f32 -> bf16 vec 4 PDL', build({ FK_T: 'float', FK_VEC: 4, FK_NPT: 4, FK_CS: 8, FK_OT: BF, FK_LOG: 1, FK_PDL: 1 })]);
cases.push(['log_softmax f16 vec 2 (8-byte copies)', build({ FK_T: '__half', FK_VEC: 2, FK_NPT: 4, FK_CS: 4, FK_LOG: 1 })]);

compileSuite('softmax.cu (softmax / log_softmax, the one-read cluster kernel)', cases);
