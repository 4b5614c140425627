/**
 * The on-disk cubin cache: ~/.cache/fastkernels/cubin/<sha256>.cubin (FASTKERNELS_CACHE_DIR overrides the
 * root). The key covers everything that changes the binary: the source, the options, the target arch and
 * the NVRTC version (and any in-memory headers).
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { setting } from '@fastkernels/core';

export interface CompileKeyInput {
  readonly source: string;
  readonly options: readonly string[];
  readonly arch: string;
  readonly nvrtcVersion: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly output?: 'cubin' | 'ptx';
}

/** sha256 over a length-prefixed encoding of the fields (no ambiguity between fields). */
export function compileCacheKey(k: CompileKeyInput): string {
  const h = createHash('sha256');
  const field = (s: string) => {
    const b = Buffer.from(s, 'utf8');
    h.update(`${b.length}:`);
    h.update(b);
  };
  field('fastkernels-cubin-v1');
  field(k.output ?? 'cubin');
  field(k.arch);
  field(k.nvrtcVersion);
  field(String(k.options.length));
  for (const o of k.options) field(o);
  const names = Object.keys(k.headers ?? {}).sort();
  field(String(names.length));
  for (const n of names) {
    field(n);
    field(k.headers![n]!);
  }
  field(k.source);
  return h.digest('hex');
}

export function cacheRoot(env: Readonly<Record<string, string | undefined>> = process.env, home = homedir()): string {
  const dir = setting('FASTKERNELS_CACHE_DIR', env);
  if (dir) return dir;
  if (env.XDG_CACHE_HOME) return join(env.XDG_CACHE_HOME, 'fastkernels');
  return join(home, '.cache', 'fastkernels');
}

export class CubinCache {
  hits = 0;
  misses = 0;
  constructor(readonly dir: string = join(cacheRoot(), 'cubin')) {}

  path(key: string, ext = 'cubin'): string {
    return join(this.dir, `${key}.${ext}`);
  }

  get(key: string, ext = 'cubin'): Uint8Array | undefined {
    try {
      const b = readFileSync(this.path(key, ext));
      this.hits++;
      return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    } catch {
      this.misses++;
      return undefined;
    }
  }

  /** Atomic write (temp file + rename) so concurrent worker processes never read half a cubin. Errors are swallowed: the cache is an optimisation. */
  put(key: string, data: Uint8Array, ext = 'cubin'): void {
    try {
      mkdirSync(this.dir, { recursive: true });
      const tmp = join(this.dir, `.${key}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
      writeFileSync(tmp, data);
      renameSync(tmp, this.path(key, ext));
    } catch {
      /* read-only home, full disk: compile again next time */
    }
  }
}
