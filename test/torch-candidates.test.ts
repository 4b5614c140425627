import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BenchReportSchema } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, cliAsync } from './helpers.js';

/**
 * PyTorch candidates through the built CLI: bench of examples/candidates/torch-demo (each declared status), the same
 * candidate inside the engine (`e2e` on the CPU), and the error a run gets where the Python has no torch (that one
 * needs only python3). The others need a Python with torch (FASTKERNELS_PYTHON, python3 or Debian's
 * /usr/bin/python3) and are skipped, saying so, without one.
 */
function pythonWithTorch(): string | undefined {
  for (const p of [process.env.FASTKERNELS_PYTHON, 'python3', '/usr/bin/python3']) {
    if (p && spawnSync(p, ['-c', 'import torch'], { timeout: 60_000 }).status === 0) return p;
  }
  return undefined;
}
const PYTHON = pythonWithTorch();
if (!PYTHON) console.warn('skipping the PyTorch candidate CLI runs: no Python here imports torch (set FASTKERNELS_PYTHON to one that does)');
const hasPython = spawnSync('python3', ['-c', 'pass']).status === 0;
const DEMO = 'examples/candidates/torch-demo';
const work = mkdtempSync(join(tmpdir(), 'fk-torch-cli-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe.skipIf(!hasPython)('PyTorch candidates: no torch', () => {
  it('bench stops at the load naming the file, what is missing and the fix (exit 2)', async () => {
    const py = join(work, 'python-no-torch');
    writeFileSync(py, '#!/bin/sh\nexec python3 -S "$@"\n');
    chmodSync(py, 0o755);
    const r = await cliAsync(['bench', '--candidates', DEMO, '--task', 'rms_norm', '--iters', '4'], { env: { FASTKERNELS_PYTHON: py } });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/L1\/rms_norm\.py: PyTorch candidates need torch, and FASTKERNELS_PYTHON lacks it/);
    expect(r.stderr).toMatch(/fix: install torch for that Python \(`.*python-no-torch -m pip install torch`\)/);
  });
});

describe.skipIf(!PYTHON)('PyTorch candidates through the CLI (CPU)', () => {
  it('bench: torch-demo gets its declared statuses', async () => {
    const r = await cliAsync(['bench', '--candidates', DEMO, '--keep-going', '--iters', '12', '--json'], { env: { FASTKERNELS_PYTHON: PYTHON! }, timeoutMs: 240_000 });
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    const status = (task: string) => report.summary.tasks.find((t) => t.task === task)?.status;
    expect(report.complete).toBe(true);
    expect(status('L1/rms_norm'), JSON.stringify(report.results.map((x) => [x.task, x.case, x.status, x.detail]))).toBe('PASSED');
    expect(status('L1/silu_and_mul')).toBe('INCORRECT_NUMERICAL');
    expect(status('L1/relu')).toBe('RUNTIME_ERROR');
    for (const x of report.results.filter((y) => y.task === 'L1/rms_norm')) {
      expect(x.checks).toEqual(expect.arrayContaining(['worker-clock', 'outputs-owned-fresh', 'input-mutation', 'integrity', 'threads-handles']));
    }
  }, 300_000);

  it('e2e: the engine runs the PyTorch RMSNorm in every layer and agrees with the baseline token for token', async () => {
    const model = join(work, 'tiny-llama');
    const cands = join(work, 'cands');
    mkdirSync(model, { recursive: true });
    mkdirSync(join(cands, 'L1'), { recursive: true });
    copyFileSync(join(ROOT, 'packages/model-zoo/fixtures/tiny-llama/config.json'), join(model, 'config.json'));
    copyFileSync(join(ROOT, DEMO, 'L1/rms_norm.py'), join(cands, 'L1/rms_norm.py'));
    const r = await cliAsync(['e2e', '--model', model, '--candidates', cands, '--backend', 'cpu', '--requests', 'synthetic:2:4-8:2-4:0', '--workload', 'throughput'], {
      env: { FASTKERNELS_PYTHON: PYTHON! },
      timeoutMs: 240_000,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toMatch(/exact agreement 2\/2/);
    expect(r.stdout + r.stderr).toMatch(/candidate run with L1\/rms_norm/);
    expect(r.stdout + r.stderr).not.toMatch(/dropp/);
  }, 300_000);
});
