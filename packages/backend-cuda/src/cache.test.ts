import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cacheRoot, compileCacheKey, CubinCache } from './cache.js';

const base = { source: 'extern "C" __global__ void k() {}', options: ['-std=c++17'], arch: 'sm_90a', nvrtcVersion: '13.0' };

describe('cubin cache', () => {
  it('keys are sha256 hex, deterministic, and change with source, options, arch, NVRTC version and headers', () => {
    const k = compileCacheKey(base);
    expect(k).toMatch(/^[0-9a-f]{64}$/);
    expect(compileCacheKey({ ...base })).toBe(k);
    const variants = [
      { ...base, source: base.source + ' ' },
      { ...base, options: ['-std=c++20'] },
      { ...base, options: ['-std=c++17', '-DX'] },
      { ...base, arch: 'sm_90' },
      { ...base, nvrtcVersion: '13.1' },
      { ...base, headers: { 'a.h': '' } },
      { ...base, output: 'ptx' as const },
    ];
    const keys = new Set(variants.map(compileCacheKey));
    expect(keys.size).toBe(variants.length);
    expect(keys.has(k)).toBe(false);
    // field boundaries are unambiguous
    expect(compileCacheKey({ ...base, options: ['ab', 'c'] })).not.toBe(compileCacheKey({ ...base, options: ['a', 'bc'] }));
  });

  it('lives in ~/.cache/fastkernels unless FASTKERNELS_CACHE_DIR or XDG_CACHE_HOME say otherwise', () => {
    expect(cacheRoot({}, '/home/u')).toBe('/home/u/.cache/fastkernels');
    expect(cacheRoot({ XDG_CACHE_HOME: '/xdg' }, '/home/u')).toBe('/xdg/fastkernels');
    expect(cacheRoot({ FASTKERNELS_CACHE_DIR: '/c', XDG_CACHE_HOME: '/xdg' }, '/home/u')).toBe('/c');
  });

  it('stores and finds cubins atomically, counting hits and misses', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'fk-cache-')), 'cubin');
    const c = new CubinCache(dir);
    const key = compileCacheKey(base);
    expect(c.get(key)).toBeUndefined();
    c.put(key, new Uint8Array([1, 2, 3]));
    expect([...c.get(key)!]).toEqual([1, 2, 3]);
    expect([c.hits, c.misses]).toEqual([1, 1]);
    expect(readdirSync(dir)).toEqual([`${key}.cubin`]);
  });
});
