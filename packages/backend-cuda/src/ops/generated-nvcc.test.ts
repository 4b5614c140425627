/**
 * Every class of generated source compiles for sm_90a, with no register spills: a matrix of (expression, dtypes,
 * class) plus the reductions and norms, written to a temp dir and compiled with nvcc (device code only: -cubin, what
 * NVRTC produces at run time). Skipped, saying so, where nvcc is absent.
 */
import { compileSuite } from '../../test/nvcc-compile.js';
import type { GenDType } from './ctypes.js';
import { elementwiseSource, type EwClass, type GeneratedKernel } from './elementwise-source.js';
import { singleOp, type Expr } from './expr.js';
import { rowNormSource } from './norm-source.js';
import { columnReduceSource, rowReduceSource, rowSoftmaxSource } from './reduce-source.js';

const SQUARE: Expr = singleOp('square', 1);
/** silu(x) * y + z */
const CHAIN3: Expr = { inputs: 3, nodes: [{ op: 'silu', args: [{ input: 0 }] }, { op: 'mul', args: [{ node: 0 }, { input: 1 }] }, { op: 'add', args: [{ node: 1 }, { input: 2 }] }] };
const cases: [string, () => GeneratedKernel][] = [];
const contig = (vec: number): EwClass => ({ kind: 'contig', vec });
const strided = (rank: number, vec: number, innerContig: boolean[], index: 'i32' | 'i64' = 'i32'): EwClass => ({ kind: 'strided', rank, vec, innerContig, index });

for (const d of ['bf16', 'f16', 'f32'] as GenDType[]) {
  const v = d === 'f32' ? 4 : 8;
  cases.push([`chain3 ${d} contig`, () => elementwiseSource({ expr: CHAIN3, inDTypes: [d, d, d], outDType: d, cls: contig(v) })]);
  cases.push([`chain3 ${d} strided vec`, () => elementwiseSource({ expr: CHAIN3, inDTypes: [d, d, d], outDType: d, cls: strided(2, v, [true, false, true]) })]);
  cases.push([`chain3 ${d} strided scalar i64`, () => elementwiseSource({ expr: CHAIN3, inDTypes: [d, d, d], outDType: d, cls: strided(8, 1, [true, true, true], 'i64') })]);
}
for (const [op, attrs] of [['gelu', { approximate: 'none' }], ['gelu', { approximate: 'tanh' }], ['softplus', { beta: 1, threshold: 20 }], ['log_sigmoid', undefined], ['quick_gelu', undefined], ['sign', undefined], ['to', { dtype: 'bf16' }]] as const) {
  cases.push([`${op} bf16 contig`, () => elementwiseSource({ expr: singleOp(op, 1, attrs), inDTypes: ['bf16'], outDType: 'bf16', cls: contig(8) })]);
}
cases.push(['every op once (f32 -> f32, strided)', () => {
  const nodes = ['neg', 'abs', 'exp', 'exp2', 'expm1', 'log', 'log2', 'log1p', 'sqrt', 'rsqrt', 'sin', 'cos', 'tan', 'tanh', 'erf', 'floor', 'ceil', 'trunc', 'round', 'reciprocal', 'relu', 'sigmoid', 'silu', 'mish', 'hardswish', 'hardsigmoid', 'elu', 'leaky_relu', 'logical_not']
    .map((op) => ({ op, args: [{ input: 0 }] }));
  const bin = ['add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'logical_and', 'logical_or', 'clamp_min', 'clamp_max', 'div_trunc', 'div_floor', 'fmod', 'remainder']
    .map((op) => ({ op, args: [{ input: 0 }, { input: 1 }] }));
  return elementwiseSource({ expr: { inputs: 3, nodes: [...nodes, ...bin, { op: 'where', args: [{ input: 2 }, { input: 0 }, { input: 1 }] }] }, inDTypes: ['f32', 'f32', 'bool'], outDType: 'f32', cls: strided(3, 1, [true, true, true]) });
}]);
cases.push(['floor division i64 (double compute, its helper function)', () => elementwiseSource({ expr: singleOp('div_floor', 2), inDTypes: ['i64', 'i64'], outDType: 'i64', cls: contig(2) })]);
cases.push(['compare i32 x f16 -> bool (double compute)', () => elementwiseSource({ expr: singleOp('ge', 2), inDTypes: ['i32', 'f16'], outDType: 'bool', cls: contig(4) })]);
cases.push(['where bool, bf16, f32 -> f32 with a runtime scalar', () => elementwiseSource({ expr: { inputs: 2, params: 1, nodes: [{ op: 'where', args: [{ input: 0 }, { input: 1 }, { param: 0 }] }] }, inDTypes: ['bool', 'bf16'], outDType: 'f32', cls: strided(2, 4, [true, false]) })]);
for (const op of ['sum', 'mean', 'amax', 'amin'] as const) {
  cases.push([`row ${op} bf16 warp`, () => rowReduceSource({ op, inDType: 'bf16', outDType: 'bf16', vec: 8, tpr: 32, block: 256 })]);
}
cases.push(['row sum of squares f16 block', () => rowReduceSource({ op: 'sum', prologue: SQUARE, inDType: 'f16', outDType: 'f32', vec: 8, tpr: 512, block: 512 })]);
cases.push(['row sum i32 -> i64', () => rowReduceSource({ op: 'sum', inDType: 'i32', outDType: 'i64', vec: 4, tpr: 32, block: 256 })]);
// the column kernel's launch shapes (columnLaunch): 32 x 8 for wide inner, 4 x 64 for an odd inner of 3, 128 x 2 for a
// short R; split stages: f32 / f64 partials in, the output dtype out
for (const op of ['sum', 'mean', 'amax', 'amin'] as const) {
  cases.push([`column ${op} bf16 vec 8, 32 x 8`, () => columnReduceSource({ op, inDType: 'bf16', outDType: 'bf16', vec: 8, tx: 32, ty: 8 })]);
}
cases.push(['column mean f32 vec 4, 32 x 8', () => columnReduceSource({ op: 'mean', inDType: 'f32', outDType: 'f32', vec: 4, tx: 32, ty: 8 })]);
cases.push(['column amax f32 scalar, 4 x 64 (inner 3)', () => columnReduceSource({ op: 'amax', inDType: 'f32', outDType: 'f32', vec: 1, tx: 4, ty: 64 })]);
cases.push(['column sum bf16 -> f32 partials, 128 x 2', () => columnReduceSource({ op: 'sum', inDType: 'bf16', outDType: 'f32', vec: 8, tx: 128, ty: 2 })]);
cases.push(['column mean f32 partials -> bf16 (stage 2), 256 x 1', () => columnReduceSource({ op: 'mean', inDType: 'f32', outDType: 'bf16', vec: 4, tx: 256, ty: 1 })]);
cases.push(['column sum of squares f16 -> f32', () => columnReduceSource({ op: 'sum', prologue: SQUARE, inDType: 'f16', outDType: 'f32', vec: 8, tx: 32, ty: 8 })]);
cases.push(['column sum i32 -> f64 partials', () => columnReduceSource({ op: 'sum', inDType: 'i32', outDType: 'f64', vec: 4, tx: 32, ty: 8 })]);
cases.push(['column sum f64 partials -> i64 (stage 2)', () => columnReduceSource({ op: 'sum', inDType: 'f64', outDType: 'i64', vec: 2, tx: 32, ty: 8 })]);
cases.push(['column sum u8 -> i64 vec 8', () => columnReduceSource({ op: 'sum', inDType: 'u8', outDType: 'i64', vec: 8, tx: 32, ty: 8 })]);
cases.push(['column amin i16 vec 8, 8 x 32', () => columnReduceSource({ op: 'amin', inDType: 'i16', outDType: 'i16', vec: 8, tx: 8, ty: 32 })]);
cases.push(['column mean f64 scalar, 1 x 256', () => columnReduceSource({ op: 'mean', inDType: 'f64', outDType: 'f64', vec: 1, tx: 1, ty: 256 })]);
// planColumns' narrow tiles (one pass over outer x inner): a mean over tokens and a channels-last pool at 8 x 32, f32
// tokens at 16 x 16, a split's second stage at 8 x 32
cases.push(['column mean bf16 vec 8, 8 x 32 (narrow tiles)', () => columnReduceSource({ op: 'mean', inDType: 'bf16', outDType: 'bf16', vec: 8, tx: 8, ty: 32 })]);
cases.push(['column mean f16 vec 8, 8 x 32 (narrow tiles)', () => columnReduceSource({ op: 'mean', inDType: 'f16', outDType: 'f16', vec: 8, tx: 8, ty: 32 })]);
cases.push(['column mean f32 vec 4, 16 x 16 (narrow tiles)', () => columnReduceSource({ op: 'mean', inDType: 'f32', outDType: 'f32', vec: 4, tx: 16, ty: 16 })]);
cases.push(['column mean f32 partials -> bf16 (stage 2), 8 x 32', () => columnReduceSource({ op: 'mean', inDType: 'f32', outDType: 'bf16', vec: 4, tx: 8, ty: 32 })]);
// rowLaunch picks up to 1024 threads a row (64 registers a thread)
for (const d of ['bf16', 'f32'] as GenDType[]) {
  const v = d === 'f32' ? 4 : 8;
  cases.push([`row amax ${d} 1024 threads`, () => rowReduceSource({ op: 'amax', inDType: d, outDType: d, vec: v, tpr: 1024, block: 1024 })]);
  cases.push([`log_softmax ${d} 1024 threads`, () => rowSoftmaxSource({ log: true, inDType: d, outDType: d, vec: v, tpr: 1024, block: 1024 })]);
  cases.push([`softmax ${d} -> f32 1024 threads`, () => rowSoftmaxSource({ log: false, inDType: d, outDType: 'f32', vec: 4, tpr: 1024, block: 1024 })]);
}
cases.push(['log_softmax bf16 block', () => rowSoftmaxSource({ log: true, inDType: 'bf16', outDType: 'bf16', vec: 8, tpr: 256, block: 256 })]);
cases.push(['softmax bf16 -> f32 warp', () => rowSoftmaxSource({ log: false, inDType: 'bf16', outDType: 'f32', vec: 4, tpr: 32, block: 256 })]);
cases.push(['layer_norm FLUX bf16', () => rowNormSource({ kind: 'layer', inDType: 'bf16', outDType: 'bf16', wDType: 'bf16', hasWeight: true, hasBias: true, vec: 8, tpr: 96, block: 96, npt: 4, weightVector: true })]);
cases.push(['layer_norm BGE bf16 warp, f32 weight', () => rowNormSource({ kind: 'layer', inDType: 'bf16', outDType: 'bf16', wDType: 'f32', hasWeight: true, hasBias: true, vec: 8, tpr: 32, block: 256, npt: 4, weightVector: false })]);
cases.push(['layer_norm no affine f32', () => rowNormSource({ kind: 'layer', inDType: 'f32', outDType: 'f32', wDType: null, hasWeight: false, hasBias: false, vec: 4, tpr: 32, block: 256, npt: 8 })]);
// the register caps of norm.ts (maxVectorsPerThread): 6 vectors at 1024 threads, 14 at 512, 16 below, no spills
for (const d of ['bf16', 'f16', 'f32'] as GenDType[]) {
  const v = d === 'f32' ? 4 : 8;
  for (const [tpr, npt] of [[1024, 6], [512, 14], [256, 16]] as const) {
    cases.push([`layer_norm ${d} ${tpr} threads x ${npt} vectors`, () => rowNormSource({ kind: 'layer', inDType: d, outDType: d, wDType: d, hasWeight: true, hasBias: true, vec: v, tpr, block: tpr, npt, weightVector: true })]);
    cases.push([`group_norm ${d} ${tpr} threads x ${npt} vectors`, () => rowNormSource({ kind: 'group', inDType: d, outDType: d, wDType: d, hasWeight: true, hasBias: true, vec: v, tpr, block: tpr, npt, channelPerVector: false })]);
  }
}
cases.push(['group_norm YOLO f16', () => rowNormSource({ kind: 'group', inDType: 'f16', outDType: 'f16', wDType: 'f16', hasWeight: true, hasBias: true, vec: 8, tpr: 1024, block: 1024, npt: 6, channelPerVector: true })]);
cases.push(['group_norm odd spatial f32', () => rowNormSource({ kind: 'group', inDType: 'f32', outDType: 'f32', wDType: 'f32', hasWeight: true, hasBias: false, vec: 1, tpr: 32, block: 256, npt: 8, channelPerVector: false })]);

// Found when the spill check began reading ptxas' report on stderr (it had read stdout, so it could not fail). Both
// are measured harmless for now (ops suite, H100: chain3 f32 at 96%+ of a same-size copy, group_norm at its targets);
// fixing them is a tuning change with its GPU check.
compileSuite('generated sources', cases, {
  'chain3 f32 contig': { bytes: 12, why: 'the call ABI of expf / the division slow path in silu, 3 f32 inputs x 4 wide x 2 deep' },
  'group_norm f32 512 threads x 14 vectors': { bytes: 4, why: '128 registers a thread at 512 threads: 14 f32 vectors of the row held for the second pass' },
});
