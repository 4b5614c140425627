/** Helpers shared by the CPU tests: the real compile helper run against the fake `triton` in test-support/. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HelperCommand } from './client.js';
import { TritonToolchain, writeHelperScript } from './toolchain.js';

export const FAKE_TRITON = fileURLToPath(new URL('../test-support/fake-triton', import.meta.url));
export const PYTHON = process.env.FASTKERNELS_TEST_PYTHON ?? 'python3';
/** Tests that run Python skip (saying so) where there is none. */
export const HAS_PYTHON = spawnSync(PYTHON, ['--version']).status === 0;

export function tempCacheEnv(): Record<string, string | undefined> {
  return { ...process.env, FASTKERNELS_CACHE_DIR: mkdtempSync(join(tmpdir(), 'fk-triton-test-')) };
}

/** The real helper script, run by python3 with the fake triton first on PYTHONPATH. */
export function fakeHelperCommand(env = tempCacheEnv(), withTriton = true): HelperCommand {
  return {
    command: PYTHON,
    args: ['-u', writeHelperScript(env)],
    env: { ...env, PYTHONPATH: withTriton ? FAKE_TRITON : '', PYTHONDONTWRITEBYTECODE: '1' },
  };
}

export function fakeToolchain(opts: { timeoutMs?: number; withTriton?: boolean } = {}): TritonToolchain {
  const env = tempCacheEnv();
  return new TritonToolchain({
    env,
    helper: fakeHelperCommand(env, opts.withTriton ?? true),
    availability: { available: true, python: PYTHON, pythonVersion: '3', tritonVersion: '3.6.0+fake', tried: [] },
    timeoutMs: opts.timeoutMs,
  });
}

export const ADD_SOURCE = `import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr = 1024):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
`;

export function addRequest(source = ADD_SOURCE, fn = 'add_kernel', extra: Record<string, unknown> = {}) {
  return {
    source,
    filename: 'add.py',
    fn,
    signature: { x_ptr: '*fp32', y_ptr: '*fp32', out_ptr: '*fp32', n_elements: 'i32', BLOCK_SIZE: 'constexpr' },
    constexprs: {},
    attrs: { x_ptr: [['tt.divisibility', 16]] as [string, number][] },
    options: { num_warps: 4, num_stages: 3 },
    target: { backend: 'cuda' as const, arch: 90, warp_size: 32 },
    ...extra,
  };
}
