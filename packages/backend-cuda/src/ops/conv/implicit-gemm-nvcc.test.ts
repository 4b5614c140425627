/**
 * Every variant of the conv fallback (dtype x direction x bias), of the bias add and of the pooling kernel compiles with nvcc for sm_90a,
 * device code only (-cubin, what NVRTC produces at run time), with no register spills. Skipped where nvcc is absent.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { GeneratedKernel } from '../elementwise-source.js';
import { biasAddSource, igemmSource, type ConvDType } from './implicit-gemm-source.js';
import { poolSource, type PoolKind } from './pool-source.js';

function hasNvcc(): boolean {
  try {
    execFileSync('nvcc', ['--version'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}
const nvcc = hasNvcc();

const cases: [string, GeneratedKernel][] = [];
for (const dtype of ['f32', 'f16', 'bf16'] as ConvDType[]) {
  for (const transposed of [false, true]) for (const bias of [false, true]) cases.push([`igemm ${dtype}${transposed ? ' transposed' : ''}${bias ? ' +bias' : ''}`, igemmSource({ dtype, transposed, bias })]);
  for (const vec of dtype === 'f32' ? [1, 4] : [1, 8]) cases.push([`bias add ${dtype} x${vec}`, biasAddSource(dtype, vec)]);
  for (const kind of ['max', 'avg', 'adaptive_avg', 'adaptive_max'] as PoolKind[]) {
    for (const channelsLast of [false, true]) {
      const indices = kind.endsWith('max');
      cases.push([`pool ${kind} ${dtype}${indices ? ' +indices' : ''}${channelsLast ? ' channels-last' : ''}`, poolSource({ dtype, kind, indices, channelsLast })]);
    }
  }
}

describe(`conv fallback sources compile with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvcc ? mkdtempSync(join(tmpdir(), 'fk-conv-')) : '';
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  cases.forEach(([name, g], i) => {
    it.skipIf(!nvcc)(name, () => {
      const file = join(dir, `conv${i}.cu`);
      writeFileSync(file, g.source);
      // ptxas -v reports registers, stack and spills on stderr
      const r = spawnSync('nvcc', ['-cubin', '-std=c++17', '-arch=sm_90a', '-Xptxas', '-v', file, '-o', join(dir, `conv${i}.cubin`)], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`nvcc failed for ${name}:\n${r.stderr}`);
      const log = `${r.stdout}${r.stderr}`;
      expect(log).toMatch(/Used \d+ registers/);
      expect(log).not.toMatch(/[1-9]\d* bytes spill/);
      expect(log).not.toMatch(/[1-9]\d* bytes stack frame/);
    }, 120_000);
  });
});
