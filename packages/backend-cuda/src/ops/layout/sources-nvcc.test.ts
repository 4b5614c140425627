/** Every class of this folder's generated sources compiles for sm_90a without spills (skipped without nvcc). */
import { compileSuite } from '../../../test/nvcc-compile.js';
import type { GenDType } from '../ctypes.js';
import type { GeneratedKernel } from '../elementwise-source.js';
import { gatherSource, scatterSource } from './index-source.js';
import { interpolateChannelsLastSource, interpolateSource } from './interpolate-source.js';
import { padSource } from './pad-source.js';
import { flipSource, oneHotSource, triangleSource } from './remap-source.js';

const cases: [string, () => GeneratedKernel][] = [];
for (const itemsize of [1, 2, 4, 8]) cases.push([`gather ${itemsize}-byte values rank 3 i64`, () => gatherSource({ rank: 3, itemsize, index: 'i64' })]);
cases.push(['gather rank 8 i32', () => gatherSource({ rank: 8, itemsize: 2, index: 'i32' })]);
cases.push(['gather rank 1 i64', () => gatherSource({ rank: 1, itemsize: 4, index: 'i64' })]);
for (const [out, src] of [['f32', 'bf16'], ['f32', 'f16'], ['f32', 'f32'], ['f64', 'f64'], ['i32', 'i32'], ['i64', 'i64'], ['i64', 'i32']] as [GenDType, GenDType][]) {
  cases.push([`scatter add ${src} into ${out}`, () => scatterSource({ rank: 2, outDType: out, srcDType: src, index: 'i64', add: true })]);
}
cases.push(['scatter add a scalar into f32', () => scatterSource({ rank: 3, outDType: 'f32', srcDType: null, index: 'i32', add: true })]);
cases.push(['scatter bf16 from bf16', () => scatterSource({ rank: 2, outDType: 'bf16', srcDType: 'bf16', index: 'i64', add: false })]);
cases.push(['scatter bf16 from f32 (converted)', () => scatterSource({ rank: 2, outDType: 'bf16', srcDType: 'f32', index: 'i64', add: false })]);
cases.push(['scatter a scalar into i64', () => scatterSource({ rank: 4, outDType: 'i64', srcDType: null, index: 'i64', add: false })]);
for (const mode of ['reflect', 'replicate', 'circular'] as const) cases.push([`pad ${mode} rank 4`, () => padSource({ rank: 4, itemsize: 2, mode })]);
cases.push(['pad reflect rank 8 f64', () => padSource({ rank: 8, itemsize: 8, mode: 'reflect' })]);
for (const d of ['bf16', 'f16', 'f32', 'f64'] as GenDType[]) {
  cases.push([`interpolate bilinear ${d}`, () => interpolateSource({ mode: 'bilinear', alignCorners: false, spatial: 2, dtype: d })]);
}
cases.push(['interpolate bilinear align_corners', () => interpolateSource({ mode: 'bilinear', alignCorners: true, spatial: 2, dtype: 'bf16' })]);
cases.push(['interpolate nearest 2-D', () => interpolateSource({ mode: 'nearest', alignCorners: false, spatial: 2, dtype: 'f16' })]);
cases.push(['interpolate nearest-exact 3-D', () => interpolateSource({ mode: 'nearest-exact', alignCorners: false, spatial: 3, dtype: 'f32' })]);
cases.push(['interpolate linear 1-D', () => interpolateSource({ mode: 'linear', alignCorners: true, spatial: 1, dtype: 'f32' })]);
cases.push(['interpolate trilinear', () => interpolateSource({ mode: 'trilinear', alignCorners: false, spatial: 3, dtype: 'bf16' })]);
cases.push(['interpolate bicubic', () => interpolateSource({ mode: 'bicubic', alignCorners: false, spatial: 2, dtype: 'f32' })]);
cases.push(['interpolate bicubic align_corners f64', () => interpolateSource({ mode: 'bicubic', alignCorners: true, spatial: 2, dtype: 'f64' })]);
// channels-last: 16-byte vectors along C (8 halves, 4 floats, 2 doubles) and the scalar fallback
cases.push(['interpolate channels-last nearest f16 x8', () => interpolateChannelsLastSource({ mode: 'nearest', alignCorners: false, spatial: 2, dtype: 'f16', vec: 8 })]);
cases.push(['interpolate channels-last nearest bf16 x1', () => interpolateChannelsLastSource({ mode: 'nearest', alignCorners: false, spatial: 2, dtype: 'bf16', vec: 1 })]);
cases.push(['interpolate channels-last bilinear f16 x8', () => interpolateChannelsLastSource({ mode: 'bilinear', alignCorners: false, spatial: 2, dtype: 'f16', vec: 8 })]);
cases.push(['interpolate channels-last bilinear bf16 x1 align_corners', () => interpolateChannelsLastSource({ mode: 'bilinear', alignCorners: true, spatial: 2, dtype: 'bf16', vec: 1 })]);
cases.push(['interpolate channels-last bicubic f32 x4', () => interpolateChannelsLastSource({ mode: 'bicubic', alignCorners: false, spatial: 2, dtype: 'f32', vec: 4 })]);
cases.push(['interpolate channels-last trilinear f64 x2', () => interpolateChannelsLastSource({ mode: 'trilinear', alignCorners: false, spatial: 3, dtype: 'f64', vec: 2 })]);
cases.push(['flip rank 4', () => flipSource({ rank: 4, itemsize: 2 })]);
cases.push(['tril rank 2 f32', () => triangleSource({ rank: 2, itemsize: 4, lower: true })]);
cases.push(['triu rank 4 bool', () => triangleSource({ rank: 4, itemsize: 1, lower: false })]);
cases.push(['one_hot i64 rank 2', () => oneHotSource({ rank: 2, dtype: 'i64' })]);
cases.push(['one_hot u8 rank 1', () => oneHotSource({ rank: 1, dtype: 'u8' })]);

compileSuite('gather / scatter / pad / interpolate / flip / triangle / one_hot sources', cases);
