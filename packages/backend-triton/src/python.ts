/**
 * Finding a Python with Triton: FASTKERNELS_PYTHON when set (only it), else the active virtualenv/conda
 * Python, `python3` on PATH, the GPU host's torch venv (/opt/torch/.venv/bin/python3) and `python`; the first
 * whose Triton is installed wins. The probe does not import Triton (that takes a second): it finds the module
 * and reads its version from the package metadata. Never throws; the reason says what to install or set.
 */
import { spawnSync } from 'node:child_process';
import { setting } from '@fastkernels/core';

export interface TritonAvailability {
  readonly available: boolean;
  /** Why not (or a note), in words a user can act on. */
  readonly reason?: string;
  /** The Python that will compile (absolute path as Python reports it). */
  readonly python?: string;
  readonly pythonVersion?: string;
  readonly tritonVersion?: string;
  /** Every candidate tried and what it said. */
  readonly tried: readonly { readonly python: string; readonly result: string }[];
}

export type Env = Readonly<Record<string, string | undefined>>;

export const TORCH_VENV_PYTHON = '/opt/torch/.venv/bin/python3';

export function pythonCandidates(env: Env = process.env): string[] {
  const pinned = setting('FASTKERNELS_PYTHON', env);
  if (pinned) return [pinned];
  const out: string[] = [];
  if (env.VIRTUAL_ENV) out.push(`${env.VIRTUAL_ENV}/bin/python3`);
  if (env.CONDA_PREFIX) out.push(`${env.CONDA_PREFIX}/bin/python3`);
  out.push('python3', TORCH_VENV_PYTHON, 'python');
  return [...new Set(out)];
}

/** Printed as one JSON line by the probed Python. Reads Triton's version without importing it. */
export const PROBE_SCRIPT = `
import json, sys
r = {"python": sys.executable, "version": sys.version.split()[0]}
try:
    import importlib.util
    spec = importlib.util.find_spec("triton")
    if spec is None:
        r["error"] = "No module named 'triton'"
    else:
        v = None
        try:
            import importlib.metadata as md
            for dist in ("triton", "pytorch-triton", "triton-nightly"):
                try:
                    v = md.version(dist)
                    break
                except Exception:
                    pass
        except Exception:
            pass
        if v is None and spec.origin:
            import re
            m = re.search(r"__version__\\s*=\\s*['\\"]([^'\\"]+)", open(spec.origin, encoding="utf-8").read())
            v = m.group(1) if m else None
        if v is None:
            r["error"] = "triton found at %s but its version is unknown" % spec.origin
        else:
            r["triton"] = v
            r["triton_path"] = spec.origin
except Exception as e:
    r["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(r))
`;

export interface ProbeOutput {
  readonly python: string;
  readonly version: string;
  readonly triton?: string;
  readonly error?: string;
}

/** Run a candidate: { ok, out } or the reason it could not run. Injectable for tests. */
export type ProbeRunner = (python: string) => { ok: true; out: ProbeOutput } | { ok: false; reason: string };

/** Runs the probe script with `env` (the environment the helper will get too). */
export const probeRunner = (env: Env = process.env): ProbeRunner => (python) => {
  const r = spawnSync(python, ['-c', PROBE_SCRIPT], { encoding: 'utf8', timeout: 20_000, env: { ...env, PYTHONDONTWRITEBYTECODE: '1' } });
  if (r.error) {
    const code = (r.error as NodeJS.ErrnoException).code;
    return { ok: false, reason: code === 'ENOENT' ? 'not found' : code === 'EACCES' ? 'not executable' : code === 'ETIMEDOUT' ? 'timed out' : r.error.message };
  }
  if (r.status !== 0) return { ok: false, reason: `exited with status ${r.status}: ${(r.stderr || r.stdout || '').trim().split('\n').slice(-2).join(' ')}` };
  const line = r.stdout.trim().split('\n').pop() ?? '';
  try {
    const out = JSON.parse(line) as ProbeOutput;
    if (typeof out.python !== 'string') throw new Error('no python field');
    return { ok: true, out };
  } catch {
    return { ok: false, reason: `not a working Python (printed: ${line.slice(0, 120)})` };
  }
};

/** Probe the candidates in order; the first with Triton wins. */
export function probeTriton(env: Env = process.env, run: ProbeRunner = probeRunner(env)): TritonAvailability {
  const tried: { python: string; result: string }[] = [];
  let firstPython: ProbeOutput | undefined;
  for (const cand of pythonCandidates(env)) {
    const r = run(cand);
    if (!r.ok) {
      tried.push({ python: cand, result: r.reason });
      continue;
    }
    firstPython ??= r.out;
    if (r.out.triton) {
      tried.push({ python: cand, result: `Python ${r.out.version}, Triton ${r.out.triton}` });
      return { available: true, python: r.out.python || cand, pythonVersion: r.out.version, tritonVersion: r.out.triton, tried };
    }
    tried.push({ python: cand, result: `${r.out.python} (Python ${r.out.version}): ${r.out.error ?? 'no triton'}` });
  }
  return { available: false, reason: unavailableReason(env, tried, firstPython), tried, python: firstPython?.python, pythonVersion: firstPython?.version };
}

/** What to install or set, given what was tried. */
export function unavailableReason(env: Env, tried: readonly { python: string; result: string }[], firstPython?: ProbeOutput): string {
  const list = tried.map((t) => `${t.python}: ${t.result}`).join('; ');
  if (env.FASTKERNELS_PYTHON) {
    return firstPython
      ? `FASTKERNELS_PYTHON=${env.FASTKERNELS_PYTHON} has no Triton (${list}). Install it there (\`${firstPython.python} -m pip install triton\`) or point FASTKERNELS_PYTHON at a Python that has it.`
      : `FASTKERNELS_PYTHON=${env.FASTKERNELS_PYTHON} cannot be run (${list}). Set FASTKERNELS_PYTHON to the python3 of an environment with Triton (e.g. ${TORCH_VENV_PYTHON}).`;
  }
  if (!firstPython) {
    return `no Python found to compile Triton kernels (tried ${list}). Install Python 3 with Triton (\`pip install triton\`), or set FASTKERNELS_PYTHON=/path/to/python3 of an environment that has it.`;
  }
  return `Triton is not installed for any Python found (${list}). Install it (\`${firstPython.python} -m pip install triton\`), or set FASTKERNELS_PYTHON to a Python that has it (on the GPU host: ${TORCH_VENV_PYTHON}).`;
}
