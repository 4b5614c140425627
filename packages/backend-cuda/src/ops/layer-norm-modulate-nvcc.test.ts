/**
 * The generated layer_norm_modulate (adaLN) kernels compile for sm_90a without spills: FLUX's launch (3072 wide, a
 * block a row), a warp a row, the register caps of norm.ts at 1024 / 512 / 256 threads (maxModulateVectorsPerThread: 5 at 1024), scalar modulation reads (an
 * unaligned chunk) and an f32 modulation on a 16-bit input. Skipped, saying so, where nvcc is absent.
 */
import { compileSuite } from '../../test/nvcc-compile.js';
import type { GenDType } from './ctypes.js';
import type { GeneratedKernel } from './elementwise-source.js';
import { rowNormSource } from './norm-source.js';

const mod = (d: GenDType, vec: number, tpr: number, block: number, npt: number, vector: boolean, mDType: GenDType = d) => () =>
  rowNormSource({ kind: 'layer', inDType: d, outDType: d, wDType: null, hasWeight: false, hasBias: false, vec, tpr, block, npt, modulate: { dtype: mDType, vector } });

const cases: [string, () => GeneratedKernel][] = [
  ['layer_norm_modulate FLUX bf16 (3072: 96 threads x 4 vectors)', mod('bf16', 8, 96, 96, 4, true)],
  ['layer_norm_modulate bf16 warp a row', mod('bf16', 8, 32, 256, 4, true)],
  ['layer_norm_modulate bf16, unaligned modulation (scalar reads)', mod('bf16', 8, 96, 96, 4, false)],
  ['layer_norm_modulate bf16 input, f32 modulation', mod('bf16', 8, 96, 96, 4, true, 'f32')],
  ['layer_norm_modulate f32 odd width (vec 1)', mod('f32', 1, 32, 256, 8, false)],
];
for (const d of ['bf16', 'f16', 'f32'] as GenDType[]) {
  const v = d === 'f32' ? 4 : 8;
  for (const [tpr, npt] of [[1024, 5], [512, 14], [256, 16]] as const) cases.push([`layer_norm_modulate ${d} ${tpr} threads x ${npt} vectors`, mod(d, v, tpr, tpr, npt, true)]);
}

compileSuite('layer_norm_modulate sources', cases, {});
