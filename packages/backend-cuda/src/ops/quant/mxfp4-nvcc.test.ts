/** mxfp4_dequant's generated kernel, per output dtype, compiles with nvcc for sm_90a with no spills and no stack frame. Skipped where nvcc is absent. */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { mxfp4DequantSource } from './mxfp4-source.js';

function hasNvcc(): boolean {
  try {
    execFileSync('nvcc', ['--version'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}
const nvcc = hasNvcc();

describe(`mxfp4_dequant compiles with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvcc ? mkdtempSync(join(tmpdir(), 'fk-mxfp4-')) : '';
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  for (const dtype of ['f32', 'f16', 'bf16'] as const) {
    it.skipIf(!nvcc)(`to ${dtype}`, () => {
      const file = join(dir, `mxfp4-${dtype}.cu`);
      writeFileSync(file, mxfp4DequantSource(dtype).source);
      const r = spawnSync('nvcc', ['-cubin', '-std=c++17', '-arch=sm_90a', '-Xptxas', '-v', file, '-o', `${file}.cubin`], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`nvcc failed for ${dtype}:\n${r.stderr}`);
      const log = `${r.stdout}${r.stderr}`;
      expect(log).toMatch(/Used \d+ registers/);
      expect(log).not.toMatch(/[1-9]\d* bytes spill/);
      expect(log).not.toMatch(/[1-9]\d* bytes stack frame/);
    }, 120_000);
  }
});
