/**
 * Which Python runs PyTorch candidates: FASTKERNELS_PYTHON when set (only it), else the active venv / conda Python,
 * `python3`, the GPU host's torch venv and `python` (backend-triton's list); the first that has a `torch` package
 * wins. The probe only finds the module (importing torch takes seconds; the worker imports it and reports a broken
 * install itself). Missing Python or torch is a UserError that names what was tried and the fix.
 */
import { spawnSync } from 'node:child_process';
import { pythonCandidates } from '@fastkernels/backend-triton';
import { UserError } from '@fastkernels/core';

type Env = Readonly<Record<string, string | undefined>>;

const PROBE = 'import importlib.util, json, sys; print(json.dumps({"python": sys.executable, "version": sys.version.split()[0], "torch": importlib.util.find_spec("torch") is not None}))';

export interface TorchPython {
  /** The command to run (as tried). */
  readonly command: string;
  /** The interpreter's own path. */
  readonly python: string;
  readonly version: string;
}

const cache = new Map<string, TorchPython | UserError>();

/** The Python to run PyTorch candidates with, or a UserError saying what is missing and how to fix it. */
export function torchPython(env: Env = process.env, file?: string): TorchPython {
  const list = pythonCandidates(env);
  const key = list.join('\0');
  let hit = cache.get(key);
  if (!hit) {
    hit = probe(list, env.FASTKERNELS_PYTHON !== undefined && env.FASTKERNELS_PYTHON !== '');
    cache.set(key, hit);
  }
  if (hit instanceof UserError) throw new UserError(hit.message, { ...hit.details, ...(file ? { file } : {}) });
  return hit;
}

function probe(list: readonly string[], pinned: boolean): TorchPython | UserError {
  const tried: string[] = [];
  let withoutTorch: { command: string; python: string } | undefined;
  for (const command of list) {
    const r = spawnSync(command, ['-c', PROBE], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
    if (r.error) {
      tried.push(`${command}: ${(r.error as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found' : r.error.message}`);
      continue;
    }
    let out: { python: string; version: string; torch: boolean } | undefined;
    try {
      out = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as typeof out;
    } catch {
      tried.push(`${command}: exit ${r.status}${r.stderr ? ` (${r.stderr.trim().split('\n').pop()})` : ''}`);
      continue;
    }
    if (out!.torch) return { command, python: out!.python, version: out!.version };
    tried.push(`${command} (${out!.python}, Python ${out!.version}): no module named 'torch'`);
    withoutTorch ??= { command, python: out!.python };
  }
  const where = pinned ? 'FASTKERNELS_PYTHON' : 'every Python tried';
  if (withoutTorch) {
    return new UserError(`PyTorch candidates need torch, and ${where} lacks it (${tried.join('; ')})`, {
      field: 'FASTKERNELS_PYTHON',
      fix: `install torch for that Python (\`${withoutTorch.command} -m pip install torch\`), or set FASTKERNELS_PYTHON=/path/to/python3 of an environment that has it (on the GPU host: /opt/torch/.venv/bin/python3)`,
    });
  }
  return new UserError(`PyTorch candidates need Python 3 with torch, and no Python could be run (${tried.join('; ')})`, {
    field: 'FASTKERNELS_PYTHON',
    fix: 'install Python 3 and torch, or set FASTKERNELS_PYTHON=/path/to/python3 of an environment with torch',
  });
}

/** Forget probed Pythons (tests). */
export function resetTorchPythonCache(): void {
  cache.clear();
}
