/**
 * Compile generated CUDA sources with nvcc for sm_90a (device code only, -cubin: what NVRTC produces at run time) and
 * check the ptxas report for spills. Shared by the *-nvcc.test.ts files of src/ops/ subfolders; where nvcc is absent
 * the suites skip, saying so.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { GeneratedKernel } from '../src/ops/elementwise-source.js';

function hasNvcc(): boolean {
  try {
    execFileSync('nvcc', ['--version'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}
export const nvcc = hasNvcc();

/** One test per case: the source compiles, with no register spills. */
export function compileSuite(title: string, cases: readonly (readonly [string, () => GeneratedKernel])[]): void {
  describe(`${title} compile with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
    const dir = nvcc ? mkdtempSync(join(tmpdir(), 'fk-gen-')) : '';
    afterAll(() => {
      if (dir) rmSync(dir, { recursive: true, force: true });
    });
    cases.forEach(([name, gen], i) => {
      it.skipIf(!nvcc)(name, () => {
        const g = gen();
        const file = join(dir, `k${i}.cu`);
        writeFileSync(file, g.source);
        let log = '';
        try {
          log = execFileSync('nvcc', ['-cubin', '-std=c++17', '-arch=sm_90a', '-Xptxas', '-v', file, '-o', join(dir, `k${i}.cubin`)], { stdio: 'pipe', encoding: 'utf8' }).toString();
        } catch (e) {
          const err = e as { stderr?: string };
          throw new Error(`nvcc failed for ${name}:\n${err.stderr ?? String(e)}\n--- source ---\n${g.source}`);
        }
        expect(log).not.toMatch(/[1-9]\d* bytes spill/);
      }, 60_000);
    });
  });
}
