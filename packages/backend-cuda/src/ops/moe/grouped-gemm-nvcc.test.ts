/**
 * Every grouped_gemm variant the launcher can generate (dtype x routing x index type x bias x weight layout) compiles
 * with nvcc for sm_90a, device code only (-cubin, as NVRTC builds it), with no spills and no stack frame. Skipped where
 * nvcc is absent.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { groupedGemmSource, type GroupedGemmVariant } from './grouped-gemm-source.js';

function hasNvcc(): boolean {
  try {
    execFileSync('nvcc', ['--version'], { stdio: 'pipe' });
    return true;
  } catch {
    return false;
  }
}
const nvcc = hasNvcc();

const variants: GroupedGemmVariant[] = [];
for (const dtype of ['f32', 'f16', 'bf16'] as const)
  for (const routing of ['ids', 'offsets'] as const)
    for (const index of ['i32', 'i64'] as const)
      for (const bias of [false, true])
        for (const layout of ['k-contiguous', 'n-contiguous'] as const) variants.push({ dtype, routing, index, bias, layout });

describe(`grouped_gemm variants compile with nvcc for sm_90a${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvcc ? mkdtempSync(join(tmpdir(), 'fk-grouped-gemm-')) : '';
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  // one nvcc run per dtype over its 16 variants keeps the file fast; each variant is a file of its own
  for (const dtype of ['f32', 'f16', 'bf16'] as const) {
    it.skipIf(!nvcc)(`${dtype}: 16 variants, no spills`, () => {
      for (const [n, v] of variants.filter((x) => x.dtype === dtype).entries()) {
        const file = join(dir, `gg-${dtype}-${n}.cu`);
        writeFileSync(file, groupedGemmSource(v).source);
        const r = spawnSync('nvcc', ['-cubin', '-std=c++17', '-arch=sm_90a', '-Xptxas', '-v', file, '-o', `${file}.cubin`], { encoding: 'utf8' });
        if (r.status !== 0) throw new Error(`nvcc failed for ${JSON.stringify(v)}:\n${r.stderr}`);
        const log = `${r.stdout}${r.stderr}`;
        expect(log, JSON.stringify(v)).toMatch(/Used \d+ registers/);
        expect(log, JSON.stringify(v)).not.toMatch(/[1-9]\d* bytes spill/);
        expect(log, JSON.stringify(v)).not.toMatch(/[1-9]\d* bytes stack frame/);
      }
    }, 300_000);
  }
});
