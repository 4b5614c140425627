import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { UserError } from '@fastkernels/core';
import type { z } from 'zod';

/** Reading the files the score and leaderboard commands take, with errors that name file, field and fix. */
export interface LoadedFile<T> {
  readonly path: string;
  readonly sha256: string;
  readonly data: T;
}

export function readBytes(path: string, what: string, fix: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'file not found' : code === 'EISDIR' ? 'is a folder, not a file' : `cannot be read (${code ?? String(e)})`;
    throw new UserError(`${what}: ${why}`, { file: path, fix });
  }
}

/** `models[3].outcome` from a zod issue path. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out || '(top level)';
}

export function loadRawJson(path: string, what: string, fix: string): LoadedFile<unknown> {
  const bytes = readBytes(path, what, fix);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  try {
    return { path, sha256, data: JSON.parse(bytes.toString('utf8')) as unknown };
  } catch (e) {
    throw new UserError(`${what}: not valid JSON (${(e as Error).message})`, { file: path, field: '(json)', fix });
  }
}

export function validate<S extends z.ZodType>(path: string, raw: unknown, schema: S, what: string, fix: string): z.output<S> {
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const more = parsed.error.issues.length > 1 ? ` (and ${parsed.error.issues.length - 1} more problem(s))` : '';
    throw new UserError(`${what}: ${issue.message}${more}`, { file: path, field: formatPath(issue.path), fix });
  }
  return parsed.data;
}

export function loadJson<S extends z.ZodType>(path: string, schema: S, what: string, fix: string): LoadedFile<z.output<S>> {
  const raw = loadRawJson(path, what, fix);
  return { ...raw, data: validate(path, raw.data, schema, what, fix) };
}
