import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { benchTask, type CaseResult } from '@fastkernels/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { environment, selectBackend } from '../../env.js';
import { stubFiles } from '../../commands/stubs.js';
import { listCandidateFiles } from '../loader.js';
import { REFERENCE_TORCH_TASKS } from '../stubs/torch.js';
import { loadTorchCandidate } from './load.js';
import { selfTimedCall } from './module.js';
import { resetTorchPythonCache } from './python.js';

/**
 * PyTorch candidates through the bench protocol on the CPU backend: the worker maps the harness's buffers from
 * /dev/shm, runs the same correctness rounds, the harness compares with the baseline and the float64 reference, and
 * times the candidate with the worker's clock. Needs a Python with torch: FASTKERNELS_PYTHON, python3 or
 * /usr/bin/python3 (Debian's python3-torch); skipped, saying so, where none imports torch.
 */
const DEMO = resolve(__dirname, '../../../../../examples/candidates/torch-demo');

function pythonWithTorch(): string | undefined {
  for (const p of [process.env.FASTKERNELS_PYTHON, 'python3', '/usr/bin/python3']) {
    if (p && spawnSync(p, ['-c', 'import torch'], { timeout: 60_000 }).status === 0) return p;
  }
  return undefined;
}
const PYTHON = pythonWithTorch();
if (!PYTHON) console.warn('skipping the PyTorch candidate bench tests: no Python here imports torch (set FASTKERNELS_PYTHON to one that does)');

async function bench(stem: string, iters = 8, dir = DEMO): Promise<CaseResult[]> {
  const env = environment();
  const file = listCandidateFiles(dir).find((f) => f.stem === stem)!;
  const task = env.taskMap.get(file.taskId)!;
  const cls = await loadTorchCandidate(file, task, { env: { ...process.env, FASTKERNELS_PYTHON: PYTHON } });
  const candidate = env.registry.child(`torch-test:${stem}`);
  candidate.override(task.id, cls);
  return benchTask({ task, baseline: env.registry, candidate, backend: selectBackend(env, 'cpu'), iters, warmup: 2, seed: 11, selfTimed: selfTimedCall });
}

describe.skipIf(!PYTHON)('PyTorch candidates on the CPU backend (torch-demo)', () => {
  beforeAll(() => resetTorchPythonCache());
  afterAll(() => resetTorchPythonCache());

  it('a correct RMSNorm passes every case (plain and fused residual, f32 and bf16), timed by the worker\'s clock', async () => {
    const rows = await bench('rms_norm');
    expect(rows.map((r) => [r.case, r.status, r.detail])).toEqual(rows.map((r) => [r.case, 'PASSED', r.detail]));
    for (const r of rows) {
      expect(r.checks).toEqual(expect.arrayContaining(['worker-clock', 'reverify-timed-calls', 'recheck']));
      expect(r.candidateMs).toBeGreaterThan(0);
      expect(r.hostMs).toBeGreaterThanOrEqual(r.candidateMs!);
      if (r.golden) expect(r.golden.candidate.status).toBe('PASSED');
    }
  }, 120_000);

  it('a wrong SiluAndMul is INCORRECT_NUMERICAL and never timed', async () => {
    const rows = await bench('silu_and_mul');
    for (const r of rows) {
      expect(r.status).toBe('INCORRECT_NUMERICAL');
      expect(r.candidateMs).toBeNull();
    }
  }, 120_000);

  it('a raising ReLU is RUNTIME_ERROR naming the .py, its line and the exception; the worker serves on', async () => {
    const rows = await bench('relu');
    expect(rows.length).toBeGreaterThan(1);
    for (const r of rows) {
      expect(r.status).toBe('RUNTIME_ERROR');
      expect(r.detail).toMatch(new RegExp(`^forward: .*${join('torch-demo', 'L1', 'relu.py').replace(/[./]/g, '\\$&')}:17: IndexError: index \\d+ is out of bounds`));
    }
  }, 120_000);

  it('`stubs --lang torch` writes stubs that load and pass as written (the reference PyTorch op in forward)', async () => {
    const env = environment();
    const dir = mkdtempSync(join(tmpdir(), 'fk-torch-stubs-'));
    try {
      for (const id of REFERENCE_TORCH_TASKS) {
        for (const f of stubFiles(env.taskMap.get(id)!, 'torch')) {
          mkdirSync(dirname(join(dir, f.rel)), { recursive: true });
          writeFileSync(join(dir, f.rel), f.text);
        }
      }
      // torch.nn.functional.rms_norm arrived in torch 2.4; Debian's python3-torch (1.13) lacks it
      const hasRmsNorm = spawnSync(PYTHON!, ['-c', 'import sys, torch.nn.functional as F; sys.exit(0 if hasattr(F, "rms_norm") else 1)']).status === 0;
      if (!hasRmsNorm) console.warn(`skipping the L1/rms_norm torch stub: ${PYTHON}'s torch has no torch.nn.functional.rms_norm (2.4+)`);
      for (const id of REFERENCE_TORCH_TASKS.filter((t) => hasRmsNorm || t !== 'L1/rms_norm')) {
        const rows = await bench(id.split('/')[1]!, 4, dir);
        expect(rows.map((r) => [id, r.case, r.status, r.detail])).toEqual(rows.map((r) => [id, r.case, 'PASSED', r.detail]));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});
