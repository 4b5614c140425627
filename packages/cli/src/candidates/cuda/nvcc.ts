/**
 * Compile a CUDA candidate's program offline with nvcc for sm_90a, as NVRTC sees it (its program name, its in-memory
 * headers): the same front end, so the same errors and log format. For machines without a GPU (CI, the tests): a
 * failure throws an error carrying the compile `log`, as the CUDA runtime's CudaCompileError does.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CudaProgram } from './module.js';

export function hasNvcc(nvcc = process.env.NVCC ?? 'nvcc'): boolean {
  return spawnSync(nvcc, ['--version']).status === 0;
}

export async function nvccCompile(p: CudaProgram, nvcc = process.env.NVCC ?? 'nvcc'): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'fk-nvcc-'));
  try {
    writeFileSync(join(dir, p.programName), p.source);
    for (const [name, text] of Object.entries(p.headers)) writeFileSync(join(dir, name), text);
    const r = spawnSync(nvcc, ['-std=c++17', '-gencode=arch=compute_90a,code=sm_90a', ...p.options, '-c', p.programName, '-o', 'k.o'], { cwd: dir, encoding: 'utf8' });
    if (r.error) throw r.error;
    if (r.status !== 0) throw Object.assign(new Error(`nvcc failed on ${p.display}`), { log: r.stderr });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
