import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { UserError, type CandidateFile } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { environment } from '../../env.js';
import { declaredOutcome } from '../expected.js';
import { listCandidateFiles } from '../loader.js';
import { loadTorchCandidate } from './load.js';
import { resetTorchPythonCache } from './python.js';
import { TORCH_WORKER_SOURCE } from './worker-source.generated.js';

/**
 * The PyTorch candidate's startup errors, which need no torch: no Python, no torch, a broken torch, and candidate
 * files that do not import, have no class or the wrong signature (the worker runs over a stand-in torch,
 * python/test-fixtures/fake_torch, so these run where torch is not installed).
 */
const FIXTURES = resolve(__dirname, '../../../python/test-fixtures');
const hasPython = spawnSync('python3', ['-c', 'pass']).status === 0;
const dir = mkdtempSync(join(tmpdir(), 'fk-torch-load-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A python3 wrapper without site-packages (so no torch), with `pythonPath` first on its path. */
function wrapper(name: string, pythonPath?: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${pythonPath ? `PYTHONPATH=${pythonPath} ` : ''}exec python3 -S "$@"\n`);
  chmodSync(path, 0o755);
  return path;
}

function candidate(stem: string, text: string): CandidateFile {
  const folder = mkdtempSync(join(dir, 'set-'));
  mkdirSync(join(folder, 'L1'));
  const path = join(folder, 'L1', `${stem}.py`);
  writeFileSync(path, text);
  return { path, relPath: join(folder, 'L1', `${stem}.py`), level: 1, stem, taskId: `L1/${stem}` };
}

async function loadError(file: CandidateFile, python: string): Promise<UserError> {
  resetTorchPythonCache();
  const task = environment().taskMap.get(file.taskId)!;
  const e = await loadTorchCandidate(file, task, { env: { ...process.env, FASTKERNELS_PYTHON: python } }).then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(UserError);
  return e as UserError;
}

const GOOD = ['import torch', '', '', 'class RMSNorm(torch.nn.Module):', '    def __init__(self, hidden_size, eps=1e-6):', '        super().__init__()', '', '    def forward(self, x, residual=None):', '        return x', ''].join('\n');

describe('PyTorch candidates: files', () => {
  it('the embedded worker is python/fk_torch_worker.py as it is now (npm run embed-torch-worker)', async () => {
    const { renderTorchWorkerSource } = (await import('../../../scripts/embed-torch-worker.mjs')) as { renderTorchWorkerSource: () => string };
    expect(renderTorchWorkerSource()).toContain(JSON.stringify(TORCH_WORKER_SOURCE));
  });

  it('lists L<k>/<stem>.py; a .py beside a class of the same stem is its helper; Expected: in the docstring', () => {
    const folder = mkdtempSync(join(dir, 'list-'));
    mkdirSync(join(folder, 'L1'));
    for (const f of ['rms_norm.py', 'relu.py', 'relu.ts', '_helper.py']) writeFileSync(join(folder, 'L1', f), '');
    expect(listCandidateFiles(folder).map((f) => f.relPath.slice(folder.length + 1))).toEqual(['L1/relu.ts', 'L1/rms_norm.py']);
    expect(declaredOutcome('"""Doc.\n\nExpected: RUNTIME_ERROR\n"""\nimport torch\n', true)).toBe('RUNTIME_ERROR');
    expect(declaredOutcome('# Expected: PASSED\nimport torch\n', true)).toBe('PASSED');
    expect(declaredOutcome('"""Doc."""\nimport torch\n# Expected: PASSED\n', true)).toBeUndefined();
  });
});

describe.skipIf(!hasPython)('PyTorch candidates: startup errors (no torch needed)', () => {
  it('no Python: names what was tried and FASTKERNELS_PYTHON', async () => {
    const e = await loadError(candidate('rms_norm', GOOD), join(dir, 'no-such-python3'));
    expect(e.message).toMatch(/need Python 3 with torch, and no Python could be run \(.*no-such-python3: not found\)/);
    expect(e.details.fix).toMatch(/FASTKERNELS_PYTHON=/);
    expect(e.details.file).toMatch(/L1\/rms_norm\.py$/);
  });

  it('no torch: names the Python and how to install it', async () => {
    const e = await loadError(candidate('rms_norm', GOOD), wrapper('python-no-torch'));
    expect(e.message).toMatch(/need torch, and FASTKERNELS_PYTHON lacks it .*no module named 'torch'/);
    expect(e.details.fix).toMatch(/-m pip install torch/);
  });

  it('a torch that fails to import: the worker says so', async () => {
    const e = await loadError(candidate('rms_norm', GOOD), wrapper('python-broken-torch', join(FIXTURES, 'broken_torch')));
    expect(e.message).toMatch(/need torch: `import torch` failed: ImportError: libtorch_cpu\.so/);
  });

  const fake = () => wrapper('python-fake-torch', join(FIXTURES, 'fake_torch'));

  it('a syntax error: file and line', async () => {
    const e = await loadError(candidate('rms_norm', GOOD.replace('return x', 'return x +')), fake());
    expect(e.message).toMatch(/^failed to import: .*L1\/rms_norm\.py:9: SyntaxError: /);
  });

  it('an import that raises: file, line and the exception', async () => {
    const e = await loadError(candidate('rms_norm', `import torch\nimport math\n\nSCALE = math.sqrt(-1)\n${GOOD}`), fake());
    expect(e.message).toMatch(/^failed to import: .*L1\/rms_norm\.py:4: ValueError: math domain error/);
  });

  it('no class of the task\'s name: what the file defines', async () => {
    const e = await loadError(candidate('rms_norm', GOOD.replace('class RMSNorm', 'class ModelNew')), fake());
    expect(e.message).toBe("no class named 'RMSNorm' (it defines ModelNew)");
    expect(e.details.fix).toMatch(/torch\.nn\.Module/);
  });

  it('a class that is not a torch.nn.Module', async () => {
    const e = await loadError(candidate('rms_norm', GOOD.replace('(torch.nn.Module)', '')), fake());
    expect(e.message).toMatch(/L1\/rms_norm\.py:4: class RMSNorm does not extend torch\.nn\.Module$/);
  });

  it('the wrong forward arity: file, class line, what the task passes and the Python signature to declare', async () => {
    const e = await loadError(candidate('rms_norm', GOOD.replace('def forward(self, x, residual=None)', 'def forward(self, x)')), fake());
    expect(e.message).toMatch(/L1\/rms_norm\.py:4: class RMSNorm: forward takes 1 argument \(x\), the task passes forward\(x, residual\?\)$/);
    expect(e.details.fix).toBe('declare forward(self, x, residual=None) (optional inputs default to None)');
  });

  it('the wrong constructor: the Python __init__ to declare', async () => {
    const e = await loadError(candidate('rms_norm', GOOD.replace('def __init__(self, hidden_size, eps=1e-6)', 'def __init__(self, hidden_size, eps, dtype)')), fake());
    expect(e.message).toMatch(/class RMSNorm: __init__ takes 3 arguments \(hidden_size, eps, dtype\), the baseline RMSNorm\(hiddenSize, eps\?\) takes 1 to 2$/);
    expect(e.details.fix).toBe('declare __init__(self, hidden_size, eps=...)');
  });

  it('patching the worker\'s clock at import is caught before any call', async () => {
    const e = await loadError(candidate('rms_norm', `import time\ntime.perf_counter = lambda: 0.0\n${GOOD}`), fake());
    expect(e.message).toMatch(/tried to patch a protected harness function: time\.perf_counter \(at import\)/);
  });
});
