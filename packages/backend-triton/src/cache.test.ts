import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stableJson, TritonDiskCache, tritonCacheDir, tritonCacheKey } from './cache.js';

const base = {
  source: 'src',
  fn: 'k',
  signature: { x: '*fp32', n: 'i32', B: 'constexpr' },
  constexprs: { B: 128, A: 1 },
  attrs: { x: [['tt.divisibility', 16]] },
  options: { num_warps: 4, num_stages: 3 },
  arch: 90,
  tritonVersion: '3.6.0',
};

describe('the Triton disk cache', () => {
  it('keys on everything that changes the binary, not on object key order', () => {
    const k = tritonCacheKey(base);
    expect(k).toMatch(/^[0-9a-f]{64}$/);
    expect(tritonCacheKey({ ...base, constexprs: { A: 1, B: 128 }, options: { num_stages: 3, num_warps: 4 } })).toBe(k);
    for (const change of [
      { source: 'src2' }, { fn: 'k2' }, { constexprs: { B: 256, A: 1 } }, { attrs: {} }, { options: { num_warps: 8, num_stages: 3 } },
      { arch: 100 }, { tritonVersion: '3.5.1' }, { signature: { n: 'i32', x: '*fp32', B: 'constexpr' } }, { signature: { x: '*bf16', n: 'i32', B: 'constexpr' } },
    ]) {
      expect(tritonCacheKey({ ...base, ...change })).not.toBe(k);
    }
    expect(stableJson({ b: [2, { d: 1, c: 0 }], a: null })).toBe('{"a":null,"b":[2,{"c":0,"d":1}]}');
  });

  it('lives beside backend-cuda\'s cubin cache and round-trips cubin + JSON', () => {
    expect(tritonCacheDir({ FASTKERNELS_CACHE_DIR: '/c' })).toBe('/c/triton');
    expect(tritonCacheDir({ XDG_CACHE_HOME: '/x' })).toBe('/x/fastkernels/triton');
    const c = new TritonDiskCache(mkdtempSync(join(tmpdir(), 'fk-tc-')));
    expect(c.get('k')).toBeUndefined();
    c.put('k', { name: 'n' }, new Uint8Array([0x7f, 0x45, 0x4c, 0x46]));
    expect(c.get('k')).toEqual({ json: { name: 'n' }, cubin: new Uint8Array([0x7f, 0x45, 0x4c, 0x46]) });
    c.putJson('tune-x', { config: 2 });
    expect(c.getJson('tune-x')).toEqual({ config: 2 });
  });
});
