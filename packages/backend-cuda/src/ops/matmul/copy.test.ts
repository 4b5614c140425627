/**
 * The matmul kernels' copies on the generated kernels (fake device): a contiguous copy is the contig class, baddbmm's
 * broadcast mask row ([B, 1, N] over [B, M, N]) and an operand made contiguous walk 16-byte vectors along the rows.
 */
import { describe, expect, it } from 'vitest';
import { fake } from '../../../test/ops-fake.js';
import { GeneratedCopy } from './copy.js';

describe('GeneratedCopy', () => {
  it('contig and vectorised strided launches; one kernel per class and dtype', () => {
    const f = fake();
    const c = new GeneratedCopy(f.cache, f.runtime);
    const out = f.t([24, 64, 256]);
    const row = f.t([24, 1, 256]);
    const rowX = row.expand([24, 64, 256]);
    c.copy(out, rowX);
    expect(f.cache.launches[0]!.entry).toBe('fk_ew_strided');
    expect(f.cache.launches[0]!.source).toContain('FkV<__nv_bfloat16, 8>');
    c.copy(f.t([24, 64, 256]), f.t([24, 64, 256]));
    expect(f.cache.launches[1]!.entry).toBe('fk_ew_contig');
    c.copy(f.t([4, 8, 32]), f.t([4, 32, 8]).transpose(1, 2));
    expect(f.cache.launches[2]!.entry).toBe('fk_ew_strided');
    c.copy(f.t([3, 5], 'f32'), f.t([3, 5], 'f32'));
    expect(f.cache.launches).toHaveLength(4);
    expect(f.cache.launches[3]!.source).toContain('float');
  });
});
