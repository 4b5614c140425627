/**
 * The on-disk cache of compiled Triton kernels, beside backend-cuda's cubin cache:
 * <cacheRoot>/triton/<sha256>.cubin and <sha256>.json (the helper's result without the cubin), where cacheRoot is
 * backend-cuda's (FASTKERNELS_CACHE_DIR, else $XDG_CACHE_HOME/fastkernels, else ~/.cache/fastkernels). The key
 * covers the source, the function, the full signature (types and constexpr markers), the constexpr values, the
 * attributes (divisibility hints), the compile options, the target arch and the Triton version. Tuning results
 * live there too (tune-<sha256>.json).
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { CubinCache, cacheRoot } from '@fastkernels/backend-cuda';

export const HELPER_PROTOCOL = 1;

/** JSON with object keys sorted (arrays keep their order), so equal requests hash equally. */
export function stableJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${stableJson(o[k])}`)
    .join(',')}}`;
}

export interface TritonKeyInput {
  readonly source: string;
  readonly fn: string;
  /** Ordered: parameter name -> Triton type or 'constexpr'. */
  readonly signature: Readonly<Record<string, string>>;
  readonly constexprs: Readonly<Record<string, unknown>>;
  readonly attrs: Readonly<Record<string, unknown>>;
  readonly options: Readonly<Record<string, unknown>>;
  readonly arch: number;
  readonly tritonVersion: string;
}

/** sha256 over length-prefixed fields (no ambiguity between fields). */
export function tritonCacheKey(k: TritonKeyInput): string {
  const h = createHash('sha256');
  const field = (s: string) => {
    const b = Buffer.from(s, 'utf8');
    h.update(`${b.length}:`);
    h.update(b);
  };
  field('fastkernels-triton-v1');
  field(String(HELPER_PROTOCOL));
  field(k.tritonVersion);
  field(`cuda:${k.arch}`);
  field(k.fn);
  // The signature's order matters (it is the parameter order), so it is hashed as a list of pairs.
  field(JSON.stringify(Object.entries(k.signature)));
  field(stableJson(k.constexprs));
  field(stableJson(k.attrs));
  field(stableJson(k.options));
  field(k.source);
  return h.digest('hex');
}

export function sha256(s: string): string {
  return createHash('sha256').update(s, 'utf8').digest('hex');
}

export function tritonCacheDir(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return join(cacheRoot(env), 'triton');
}

/** Cubin + result JSON pairs; reads never throw (a missing or corrupt entry is a miss). */
export class TritonDiskCache {
  readonly files: CubinCache;
  constructor(readonly dir: string = tritonCacheDir()) {
    this.files = new CubinCache(dir);
  }

  get(key: string): { json: unknown; cubin: Uint8Array } | undefined {
    const meta = this.files.get(key, 'json');
    if (!meta) return undefined;
    const cubin = this.files.get(key, 'cubin');
    if (!cubin) return undefined;
    try {
      return { json: JSON.parse(Buffer.from(meta).toString('utf8')), cubin };
    } catch {
      return undefined;
    }
  }

  /** The cubin first, then the JSON (a reader that finds the JSON finds the cubin). */
  put(key: string, json: unknown, cubin: Uint8Array): void {
    this.files.put(key, cubin, 'cubin');
    this.files.put(key, Buffer.from(JSON.stringify(json), 'utf8'), 'json');
  }

  getJson(name: string): unknown {
    const b = this.files.get(name, 'json');
    if (!b) return undefined;
    try {
      return JSON.parse(Buffer.from(b).toString('utf8'));
    } catch {
      return undefined;
    }
  }

  putJson(name: string, v: unknown): void {
    this.files.put(name, Buffer.from(JSON.stringify(v), 'utf8'), 'json');
  }
}
