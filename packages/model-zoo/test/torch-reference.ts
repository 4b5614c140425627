/**
 * The PyTorch oracles of bench/reference/ (plain-torch re-implementations of the production modules that load our
 * checkpoints by their production names) from vitest: which Python has torch (FASTKERNELS_PYTHON when set, else
 * `python3`, then Debian's /usr/bin/python3: the list test/torch-candidates.test.ts probes; CI installs
 * python3-torch), float32 tensors to and from a .safetensors file both sides read, and the comparison metric.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import type { HostArray, Tensor } from '@fastkernels/core';
import { SafetensorsFile, writeSafetensors } from '../src/weights/safetensors.js';

export const REFERENCE_DIR = join(import.meta.dirname, '../../../bench/reference');

function probe(): { python?: string; why: string } {
  const tried: string[] = [];
  for (const p of [process.env.FASTKERNELS_PYTHON, 'python3', '/usr/bin/python3']) {
    if (!p) continue;
    const r = spawnSync(p, ['-c', 'import torch'], { timeout: 120_000, encoding: 'utf8' });
    if (r.status === 0) return { python: p, why: '' };
    tried.push(`${p}: ${r.error ? 'not found' : (r.stderr.trim().split('\n').pop() ?? `exit ${r.status}`)}`);
  }
  return { why: `no Python here imports torch (${tried.join('; ')}); set FASTKERNELS_PYTHON to one that does` };
}

let cached: { python?: string; why: string } | undefined;
/** The Python with torch, or undefined after printing why the parity tests skip. */
export function referencePython(what: string): string | undefined {
  cached ??= probe();
  if (!cached.python) console.warn(`skipping ${what}: ${cached.why}`);
  return cached.python;
}

/** Run bench/reference/<script> with args; throws with its stderr on failure. */
export function runReference(python: string, script: string, args: readonly string[], env: Record<string, string> = {}): void {
  const r = spawnSync(python, [join(REFERENCE_DIR, script), ...args], { encoding: 'utf8', timeout: 600_000, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', ...env } });
  if (r.status !== 0) throw new Error(`${script} ${args.join(' ')} failed (exit ${r.status}): ${r.stderr || r.error?.message}`);
}

/** Write f32 host arrays / tensors as a .safetensors file. */
export function writeF32(path: string, tensors: Record<string, { shape: readonly number[]; data: ArrayLike<number> }>): void {
  writeSafetensors(path, Object.entries(tensors).map(([name, t]) => ({
    name,
    dtype: 'f32' as const,
    shape: [...t.shape],
    bytes: () => new Uint8Array(Float32Array.from(t.data).buffer),
  })));
}

/** Read one f32 tensor of a .safetensors file as a float64 host array. */
export function readF32(path: string, name: string): HostArray {
  const f = SafetensorsFile.open(path);
  try {
    const e = f.tensors.get(name);
    if (!e) throw new Error(`${path}: no tensor ${name} (has ${[...f.tensors.keys()].join(', ')})`);
    const n = e.shape.reduce((a, b) => a * b, 1);
    const b = f.readBytes(name).slice();
    return { shape: [...e.shape], data: Float64Array.from(new Float32Array(b.buffer, b.byteOffset, n)) };
  } finally {
    f.close();
  }
}

/** max |ours - ref| / max |ref|, and the max absolute difference. */
export function parityError(ours: Tensor | HostArray, ref: HostArray): { rel: number; abs: number; scale: number } {
  const a = 'toFloat64Array' in ours ? ours.toFloat64Array() : ours.data;
  if (a.length !== ref.data.length) throw new Error(`parity: ${a.length} values vs the reference's ${ref.data.length}`);
  let scale = 0;
  let abs = 0;
  for (let i = 0; i < a.length; i++) {
    scale = Math.max(scale, Math.abs(ref.data[i]!));
    const d = Math.abs(a[i]! - ref.data[i]!);
    abs = Number.isNaN(d) ? Infinity : Math.max(abs, d);
  }
  return { rel: abs / scale, abs, scale };
}
