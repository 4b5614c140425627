/**
 * Every variant of the conv fallback (dtype x direction x bias, and conv2d_act's activations), of the bias add / activation
 * epilogue and of the pooling kernel compiles with nvcc for sm_90a,
 * device code only (-cubin, what NVRTC produces at run time), with no register spills. Skipped where nvcc is absent.
 */
import { join } from 'node:path';
import { describe, it } from 'vitest';
import { expectNoSpills, nvcc, nvccCubin, nvccScratch } from '../../../test/nvcc-compile.js';
import type { GeneratedKernel } from '../elementwise-source.js';
import { biasAddSource, igemmSource, type ConvDType } from './implicit-gemm-source.js';
import { poolSource, type PoolKind } from './pool-source.js';

const cases: [string, GeneratedKernel][] = [];
for (const dtype of ['f32', 'f16', 'bf16'] as ConvDType[]) {
  for (const transposed of [false, true]) for (const bias of [false, true]) cases.push([`igemm ${dtype}${transposed ? ' transposed' : ''}${bias ? ' +bias' : ''}`, igemmSource({ dtype, transposed, bias })]);
  for (const act of ['silu', 'relu'] as const) for (const bias of [false, true]) cases.push([`igemm ${dtype}${bias ? ' +bias' : ''} +${act}`, igemmSource({ dtype, transposed: false, bias, act })]);
  for (const vec of dtype === 'f32' ? [1, 4] : [1, 8]) {
    cases.push([`bias add ${dtype} x${vec}`, biasAddSource(dtype, vec)]);
    for (const act of ['silu', 'relu'] as const) for (const bias of [false, true]) cases.push([`epilogue ${dtype} x${vec}${bias ? ' +bias' : ''} +${act}`, biasAddSource(dtype, vec, act, bias)]);
  }
  for (const kind of ['max', 'avg', 'adaptive_avg', 'adaptive_max'] as PoolKind[]) {
    for (const channelsLast of [false, true]) {
      const indices = kind.endsWith('max');
      cases.push([`pool ${kind} ${dtype}${indices ? ' +indices' : ''}${channelsLast ? ' channels-last' : ''}`, poolSource({ dtype, kind, indices, channelsLast })]);
    }
  }
}

describe(`conv fallback sources compile with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvccScratch('fk-conv-');
  cases.forEach(([name, g], i) => {
    it.skipIf(!nvcc)(name, () => expectNoSpills(nvccCubin(join(dir, `conv${i}.cu`), g.source, name), name), 120_000);
  });
});
