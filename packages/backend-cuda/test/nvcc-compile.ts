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

/** What ptxas -v said about one kernel file: registers, spills, stack frame and static shared memory. */
export interface PtxasReport {
  readonly log: string;
  readonly registers: number;
  readonly spillStoreBytes: number;
  readonly stackBytes: number;
  readonly staticSmemBytes: number;
}

/** A scratch folder for nvcc's files, removed after the file's tests ('' where nvcc is absent). */
export function nvccScratch(prefix: string): string {
  const dir = nvcc ? mkdtempSync(join(tmpdir(), prefix)) : '';
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Compile `source` as `file` with nvcc -cubin for sm_90a (what NVRTC builds at run time); throws with nvcc's error. */
export function nvccCubin(file: string, source: string, label: string): PtxasReport {
  writeFileSync(file, source);
  const r = spawnSync('nvcc', ['-cubin', '-std=c++17', '-arch=sm_90a', '-Xptxas', '-v', file, '-o', `${file}.cubin`], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`nvcc failed for ${label}:\n${r.stderr || r.error}\n--- source ---\n${source}`);
  // ptxas writes its report on stderr: without it the checks below would pass blindly
  const log = `${r.stdout}${r.stderr}`;
  expect(log, `${label}: the ptxas -v report`).toMatch(/Used \d+ registers/);
  const most = (re: RegExp) => Math.max(0, ...[...log.matchAll(re)].map((m) => Number(m[1])));
  return {
    log,
    registers: most(/Used (\d+) registers/g),
    spillStoreBytes: most(/(\d+) bytes spill stores/g),
    stackBytes: most(/(\d+) bytes stack frame/g),
    staticSmemBytes: most(/(\d+) bytes smem/g),
  };
}

/** No spills (stores or loads) and, unless allowed, no stack frame. */
export function expectNoSpills(r: PtxasReport, label: string, options: { stack?: boolean } = {}): void {
  expect(r.log, `${label}: spills`).not.toMatch(/[1-9]\d* bytes spill/);
  if (!options.stack) expect(r.stackBytes, `${label}: stack frame`).toBe(0);
}

/** One test per case: the source compiles, with no register spills (beyond a documented known spill). */
export function compileSuite(title: string, cases: readonly (readonly [string, () => GeneratedKernel])[], known: Readonly<Record<string, KnownSpill>> = {}): void {
  describe(`${title} compile with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
    const dir = nvccScratch('fk-gen-');
    cases.forEach(([name, gen], i) => {
      it.skipIf(!nvcc)(name, () => {
        const r = nvccCubin(join(dir, `k${i}.cu`), gen().source, name);
        const k = known[name];
        if (k) expect(r.spillStoreBytes, `known spill of ${name} (${k.why}): no more than ${k.bytes} bytes, and still there`).toSatisfy((b: number) => b > 0 && b <= k.bytes);
        else expect(r.log).not.toMatch(/[1-9]\d* bytes spill/);
      }, 60_000);
    });
  });
}
