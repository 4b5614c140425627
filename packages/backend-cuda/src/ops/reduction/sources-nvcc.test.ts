/** Every class of this folder's generated sources compiles for sm_90a without spills (skipped without nvcc). */
import { compileSuite } from '../../../test/nvcc-compile.js';
import type { GenDType } from '../ctypes.js';
import type { GeneratedKernel } from '../elementwise-source.js';
import { argReduceSource } from './arg-source.js';
import { cumsumSource } from './cumsum-source.js';
import { longSortSource, type LongSortEntry } from './long-sort-source.js';
import { sortSource } from './sort-source.js';
import { varSource } from './var-source.js';

const cases: [string, () => GeneratedKernel][] = [];
for (const [tpr, block] of [[1, 256], [32, 256], [1024, 1024]] as const) {
  cases.push([`argmax bf16 tpr ${tpr}`, () => argReduceSource({ largest: true, dtype: 'bf16', tpr, block })]);
  cases.push([`argmin i64 tpr ${tpr}`, () => argReduceSource({ largest: false, dtype: 'i64', tpr, block })]);
  cases.push([`cumsum f16 tpr ${tpr}`, () => cumsumSource({ inDType: 'f16', outDType: 'f16', tpr, block })]);
  cases.push([`cumsum i32 -> i64 tpr ${tpr}`, () => cumsumSource({ inDType: 'i32', outDType: 'i64', tpr, block })]);
}
cases.push(['argmax f64 warp', () => argReduceSource({ largest: true, dtype: 'f64', tpr: 32, block: 256 })]);
cases.push(['argmin bool block 512', () => argReduceSource({ largest: false, dtype: 'bool', tpr: 512, block: 512 })]);
cases.push(['cumsum f32 -> bf16 (rounded first) block 256', () => cumsumSource({ inDType: 'f32', outDType: 'bf16', tpr: 256, block: 256 })]);
cases.push(['cumsum bool -> i64 warp', () => cumsumSource({ inDType: 'bool', outDType: 'i64', tpr: 32, block: 256 })]);
cases.push(['cumsum f64 warp', () => cumsumSource({ inDType: 'f64', outDType: 'f64', tpr: 32, block: 256 })]);
for (const d of ['bf16', 'f16', 'f32', 'f64', 'i64', 'i32', 'i16', 'i8', 'u8', 'bool'] as GenDType[]) {
  cases.push([`sort ${d} ascending`, () => sortSource({ dtype: d, descending: false })]);
}
cases.push(['sort bf16 descending', () => sortSource({ dtype: 'bf16', descending: true })]);
cases.push(['sort f64 descending', () => sortSource({ dtype: 'f64', descending: true })]);
for (const entry of ['fk_lsort_init', 'fk_lsort_local', 'fk_lsort_global', 'fk_lsort_out'] as LongSortEntry[]) {
  cases.push([`long sort f64 descending (${entry})`, () => longSortSource('f64', true, entry)]);
}
cases.push(['long sort bf16 ascending', () => longSortSource('bf16', false, 'fk_lsort_local')]);
for (const [tpr, block] of [[1, 256], [32, 256], [1024, 1024]] as const) {
  cases.push([`var bf16 tpr ${tpr}`, () => varSource({ dtype: 'bf16', sqrt: false, tpr, block })]);
  cases.push([`std f64 tpr ${tpr}`, () => varSource({ dtype: 'f64', sqrt: true, tpr, block })]);
}

compileSuite('argmax / argmin / cumsum / var / sort sources', cases);
