import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { probeRunner, pythonCandidates, probeTriton, TORCH_VENV_PYTHON, type ProbeRunner } from './python.js';
import { TritonToolchain } from './toolchain.js';
import { TritonUnavailableError } from './errors.js';
import { addRequest, FAKE_TRITON, HAS_PYTHON, PYTHON } from './test-util.js';

const notFound: ProbeRunner = () => ({ ok: false, reason: 'not found' });

describe('finding a Python with Triton', () => {
  it('tries FASTKERNELS_PYTHON alone when set, else venv, python3, the torch venv, python', () => {
    expect(pythonCandidates({ FASTKERNELS_PYTHON: '/x/python' })).toEqual(['/x/python']);
    expect(pythonCandidates({ VIRTUAL_ENV: '/v' })).toEqual(['/v/bin/python3', 'python3', TORCH_VENV_PYTHON, 'python']);
  });

  it('picks the first Python that has Triton', () => {
    const seen: string[] = [];
    const run: ProbeRunner = (p) => {
      seen.push(p);
      if (p === 'python3') return { ok: true, out: { python: '/usr/bin/python3', version: '3.12.3', error: "No module named 'triton'" } };
      if (p === TORCH_VENV_PYTHON) return { ok: true, out: { python: TORCH_VENV_PYTHON, version: '3.12.3', triton: '3.6.0' } };
      return { ok: false, reason: 'not found' };
    };
    const a = probeTriton({}, run);
    expect(a).toMatchObject({ available: true, python: TORCH_VENV_PYTHON, tritonVersion: '3.6.0', pythonVersion: '3.12.3' });
    expect(seen).toEqual(['python3', TORCH_VENV_PYTHON]);
  });

  it('no Python at all: says to install Python with Triton or set FASTKERNELS_PYTHON', () => {
    const a = probeTriton({}, notFound);
    expect(a.available).toBe(false);
    expect(a.reason).toMatch(/^no Python found to compile Triton kernels \(tried python3: not found; .*python: not found\)/);
    expect(a.reason).toMatch(/Install Python 3 with Triton \(`pip install triton`\), or set FASTKERNELS_PYTHON=/);
  });

  it.skipIf(!HAS_PYTHON)('Python without Triton (the real python3 here): says how to install it and names the torch venv', () => {
    const a = probeTriton({}, (p) => (p === 'python3' ? realProbe(PYTHON) : { ok: false, reason: 'not found' }));
    expect(a.available).toBe(false);
    expect(a.reason).toMatch(/Triton is not installed for any Python found \(python3: .*No module named 'triton'/);
    expect(a.reason).toMatch(/-m pip install triton`\), or set FASTKERNELS_PYTHON to a Python that has it \(on the GPU host: \/opt\/torch\/.venv\/bin\/python3\)/);
  });

  it.skipIf(!HAS_PYTHON)('finds Triton through the real probe script (fake triton on PYTHONPATH), without importing it', () => {
    const a = probeTriton({ FASTKERNELS_PYTHON: PYTHON }, (p) => realProbe(p, { PYTHONPATH: FAKE_TRITON }));
    expect(a).toMatchObject({ available: true, tritonVersion: '3.6.0+fake' });
  });

  it('FASTKERNELS_PYTHON that does not exist or is not Python', () => {
    const a = probeTriton({ FASTKERNELS_PYTHON: '/nonexistent/python3' });
    expect(a.reason).toMatch(/^FASTKERNELS_PYTHON=\/nonexistent\/python3 cannot be run \(\/nonexistent\/python3: not found\)/);
    const dir = mkdtempSync(join(tmpdir(), 'fk-py-'));
    const fake = join(dir, 'python3');
    writeFileSync(fake, '#!/bin/sh\necho hello\n');
    chmodSync(fake, 0o755);
    expect(probeTriton({ FASTKERNELS_PYTHON: fake }).reason).toMatch(/cannot be run \(.*not a working Python \(printed: hello\)\)/);
  });

  it('a toolchain without Triton throws TritonUnavailableError with that reason before starting anything', () => {
    const tc = new TritonToolchain({ env: {}, probe: notFound });
    expect(() => tc.compileSync(addRequest())).toThrow(TritonUnavailableError);
    expect(() => tc.compileSync(addRequest())).toThrow(/^Triton kernels cannot be compiled: no Python found/);
  });
});

function realProbe(python: string, extraEnv: Record<string, string> = {}) {
  return probeRunner({ ...process.env, ...extraEnv })(python);
}
