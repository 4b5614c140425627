/**
 * Compile generated CUDA sources with nvcc for sm_90a (device code only, -cubin: what NVRTC produces at run time) and
 * check the ptxas report for spills. Shared by the *-nvcc.test.ts files of src/ops/ subfolders; where nvcc is absent
 * the suites skip, saying so.
 */
import { execFileSync, spawnSync } from 'node:child_process';
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

/**
 * Spills a case is known to have, with the reason: the test fails if the case spills more, and if it stops spilling
 * (so the entry is removed). Keep this empty where possible.
 */
export interface KnownSpill {
  readonly bytes: number;
  readonly why: string;
}

/** One test per case: the source compiles, with no register spills (beyond a documented known spill). */
export function compileSuite(title: string, cases: readonly (readonly [string, () => GeneratedKernel])[], known: Readonly<Record<string, KnownSpill>> = {}): void {
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
        const r = spawnSync('nvcc', ['-cubin', '-std=c++17', '-arch=sm_90a', '-Xptxas', '-v', file, '-o', join(dir, `k${i}.cubin`)], { encoding: 'utf8' });
        if (r.status !== 0) throw new Error(`nvcc failed for ${name}:\n${r.stderr || r.error}\n--- source ---\n${g.source}`);
        // ptxas writes its report (registers, spills) on stderr: without it the spill check below would pass blindly
        const log = `${r.stdout}${r.stderr}`;
        expect(log, 'the ptxas -v report').toMatch(/Used \d+ registers/);
        const spilled = Math.max(0, ...[...log.matchAll(/(\d+) bytes spill stores/g)].map((m) => Number(m[1])));
        const k = known[name];
        if (k) expect(spilled, `known spill of ${name} (${k.why}): no more than ${k.bytes} bytes, and still there`).toSatisfy((b: number) => b > 0 && b <= k.bytes);
        else expect(log).not.toMatch(/[1-9]\d* bytes spill/);
      }, 60_000);
    });
  });
}
