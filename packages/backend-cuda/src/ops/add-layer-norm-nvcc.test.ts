/**
 * The generated add_layer_norm kernels (fk_add_layer_norm: the post-LN residual, x + r normalised in one pass) compile
 * for sm_90a without spills: BGE-M3's launch (1024 wide bf16: a warp a row, 4 vectors a lane), f32 weights, odd widths
 * (vec 1 / 2), a warp a row at its 8 vectors, and addNormLaunch's caps (512 threads x 10 vectors, 16 below). Skipped,
 * saying so, where nvcc is absent.
 */
import { compileSuite } from '../../test/nvcc-compile.js';
import type { GenDType } from './ctypes.js';
import type { GeneratedKernel } from './elementwise-source.js';
import { rowNormSource } from './norm-source.js';

const addLn = (d: GenDType, vec: number, tpr: number, block: number, npt: number, wDType: GenDType | null, weightVector: boolean) => () =>
  rowNormSource({ kind: 'layer', inDType: d, outDType: d, wDType, hasWeight: wDType !== null, hasBias: wDType !== null, vec, tpr, block, npt, weightVector, residual: true });

const cases: [string, () => GeneratedKernel][] = [
  ['add_layer_norm BGE-M3 bf16 (1024: a warp a row x 4 vectors), bf16 weights', addLn('bf16', 8, 32, 256, 4, 'bf16', true)],
  ['add_layer_norm bf16, f32 weights (scalar reads)', addLn('bf16', 8, 32, 256, 4, 'f32', false)],
  ['add_layer_norm f32 odd width (vec 1), no affine', addLn('f32', 1, 32, 256, 8, null, false)],
  ['add_layer_norm bf16 odd width (vec 1)', addLn('bf16', 1, 32, 256, 8, 'bf16', false)],
  ['add_layer_norm f32 vec 2, a warp a row x 8 vectors', addLn('f32', 2, 32, 256, 8, 'f32', true)],
  ['add_layer_norm bf16 a warp a row x 8 vectors', addLn('bf16', 8, 32, 256, 8, 'bf16', true)],
];
for (const d of ['bf16', 'f16', 'f32'] as GenDType[]) {
  const v = d === 'f32' ? 4 : 8;
  for (const [tpr, npt] of [[512, 10], [256, 16], [64, 16]] as const) cases.push([`add_layer_norm ${d} ${tpr} threads x ${npt} vectors`, addLn(d, v, tpr, tpr, npt, d, true)]);
}

// ptxas keeps 8 bytes on the stack for the scalar (vec 1) forms at 8 vectors a lane, with registers to spare (a warp a
// row: __launch_bounds__(256)); vec 2 and wider compile clean. Odd widths only, not measured on a GPU.
const vec1 = { bytes: 8, why: 'a stack slot at 255 available registers (a warp a row), vec 1 x 8 vectors: odd widths only' };
compileSuite('add_layer_norm sources', cases, {
  'add_layer_norm f32 odd width (vec 1), no affine': vec1,
  'add_layer_norm bf16 odd width (vec 1)': vec1,
});
