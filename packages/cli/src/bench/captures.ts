import { createHash } from 'node:crypto';
import { closeSync, openSync, readFileSync, readSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import {
  CaptureIndexSchema,
  UserError,
  casesFromCaptures,
  errorMessage,
  parseSafetensorsHeader,
  resolveSpecShape,
  specDType,
  type CaptureIndex,
  type CapturedCase,
  type TaskDefinition,
} from '@fastkernels/core';

export interface LoadedCaptures {
  readonly dir: string;
  readonly indexes: { index: CaptureIndex; resolve: (file: string) => string; path: string }[];
  readonly digest: string;
}

/** Read every `*.json` capture index under DIR (recursively), validated; bad files are exit-2 errors naming them. */
export function loadCaptures(dir: string): LoadedCaptures {
  let st;
  try {
    st = statSync(dir);
  } catch {
    throw new UserError('no such folder', { file: dir, field: '--captures', fix: 'pass the folder that holds the capture index files (*.json)' });
  }
  if (!st.isDirectory()) throw new UserError('is a file, not a folder', { file: dir, field: '--captures', fix: 'pass the folder that holds the capture index files' });
  const files: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (e.name.startsWith('.')) continue;
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.json')) files.push(p);
    }
  };
  walk(dir);
  if (!files.length) throw new UserError('holds no capture index (*.json)', { file: dir, field: '--captures', fix: 'pass the folder `fastkernels capture` wrote' });
  const hash = createHash('sha256');
  const indexes: LoadedCaptures['indexes'] = [];
  for (const f of files) {
    const shown = join(dir, relative(dir, f));
    let text: string;
    try {
      text = readFileSync(f, 'utf8');
    } catch (e) {
      throw new UserError(`cannot read it (${errorMessage(e)})`, { file: shown, field: '--captures' });
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (e) {
      throw new UserError(`is not valid JSON (${(e as Error).message})`, { file: shown, field: '--captures', fix: 'capture again, or remove the file' });
    }
    const p = CaptureIndexSchema.safeParse(json);
    if (!p.success) {
      const i = p.error.issues[0]!;
      throw new UserError(`is not a capture index: ${i.path.join('.') || '(top level)'}: ${i.message}`, { file: shown, field: '--captures', fix: 'capture again; the format is {version: 1, model, workload, tasks: {<task id>: {init: [[...]], forward: [{dims, dtype, count, values?}]}}}' });
    }
    hash.update(relative(dir, f)).update('\0').update(text).update('\0');
    const base = dirname(f);
    indexes.push({ index: p.data, resolve: (file: string) => resolve(base, file), path: shown });
  }
  return { dir, indexes, digest: hash.digest('hex') };
}

/** The captured cases of a task (checked: task ids, init variants, value files and tensors). */
export function capturedCasesFor(task: TaskDefinition, caps: LoadedCaptures, maxShapes: number): CapturedCase[] {
  let cases: CapturedCase[];
  try {
    cases = casesFromCaptures(task, caps.indexes, maxShapes);
  } catch (e) {
    throw new UserError(errorMessage(e), { field: '--captures', fix: 'capture again' });
  }
  for (const c of cases) {
    for (const [name, v] of Object.entries(c.values ?? {})) {
      const spec = task.inputs.find((s) => s.name === name);
      const where = { file: v.file, field: '--captures' };
      if (!spec) throw new UserError(`captured values for '${name}' of ${task.id}: the task has no input '${name}' (inputs: ${task.inputs.map((s) => s.name).join(', ')})`, { ...where, fix: 'capture again' });
      let size: number;
      let head: Buffer;
      try {
        size = statSync(v.file).size;
        const fd = openSync(v.file, 'r');
        head = Buffer.alloc(Math.min(size, 1 << 20));
        readSync(fd, head, 0, head.byteLength, 0);
        closeSync(fd);
      } catch (e) {
        throw new UserError(`missing or unreadable (${(e as NodeJS.ErrnoException).code ?? errorMessage(e)}), named by ${c.source}`, { ...where, fix: 'copy the safetensors files next to their index, or capture again' });
      }
      let entries;
      try {
        entries = parseSafetensorsHeader(head, size);
      } catch (e) {
        throw new UserError(`${errorMessage(e)} (named by ${c.source})`, { ...where, fix: 'capture again' });
      }
      const e = entries.get(v.tensor);
      if (!e) throw new UserError(`holds no tensor '${v.tensor}' (it has ${[...entries.keys()].slice(0, 8).join(', ') || 'none'})`, { ...where, fix: 'capture again' });
      const want = resolveSpecShape(spec, c);
      const dt = specDType(spec, c);
      if (e.dtype !== dt || e.shape.length !== want.length || e.shape.some((d, i) => d !== want[i])) {
        throw new UserError(`tensor '${v.tensor}' is ${e.dtype}[${e.shape.join(', ')}], but input '${name}' of ${task.id} at ${JSON.stringify(c.dims)} is ${dt}[${want.join(', ')}]`, { ...where, fix: 'capture again' });
      }
    }
  }
  return cases;
}
