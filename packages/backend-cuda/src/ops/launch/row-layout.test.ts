/**
 * rowLayout / rowGroupLayout (launch/common.ts): how the row kernels address a view's rows in place. For every view the
 * kernels' formula — row r at (r / group) groupStride + (r % group) rowStride — must land on the element the view's own
 * strides name, and views whose rows need more than two levels must come back null (the launcher copies them).
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { rowGroupLayout, rowLayout } from './common.js';

const cpu = new CpuBackend();

/** The element offset of each row's first element, from the view's strides (row-major over the leading dims). */
function rowStarts(t: Tensor): number[] {
  const lead = t.shape.slice(0, -1);
  const rows = lead.reduce((a, b) => a * b, 1);
  return Array.from({ length: rows }, (_, r) => {
    let off = t.offset;
    for (let d = lead.length - 1, rest = r; d >= 0; d--) {
      off += (rest % lead[d]!) * t.strides[d]!;
      rest = Math.floor(rest / lead[d]!);
    }
    return off;
  });
}

function expectAddressed(t: Tensor): void {
  const l = rowGroupLayout(t)!;
  expect(l).not.toBeNull();
  const starts = rowStarts(t);
  expect(l.rows).toBe(starts.length);
  expect(starts.map((_, r) => t.offset + Math.floor(r / l.group) * l.groupStride + (r % l.group) * l.rowStride)).toEqual(starts);
}

describe('rowGroupLayout', () => {
  it('reads per-head views of a fused projection in place: Qwen3 q / k [T, heads, d], FLUX [B, S, H, d] slices', () => {
    const T = 5;
    const [nq, nk, d] = [4, 2, 8];
    const qkv = Tensor.zeros(cpu, [T, (nq + 2 * nk) * d], 'f32');
    const q = qkv.narrow(1, 0, nq * d).view(T, nq, d);
    const k = qkv.narrow(1, nq * d, nk * d).view(T, nk, d);
    expect(rowLayout(q)).toBeNull(); // tokens are not nq x d apart: one stride does not reach every row
    expectAddressed(q);
    expectAddressed(k);
    expect(rowGroupLayout(k)).toMatchObject({ rows: T * nk, group: nk, rowStride: d, groupStride: (nq + 2 * nk) * d });
    const [B, S, H] = [2, 3, 4];
    const flux = Tensor.zeros(cpu, [B, S, 3 * H * d], 'f32');
    for (const i of [0, 1, 2]) expectAddressed(flux.narrow(2, i * H * d, H * d).view(B, S, H, d));
  });

  it('one level comes back as a single group; three levels, or a strided last dim, are null', () => {
    const x = Tensor.zeros(cpu, [6, 16], 'f32');
    expect(rowGroupLayout(x)).toMatchObject({ rows: 6, rowStride: 16, group: 6, groupStride: 0 });
    expectAddressed(x.narrow(1, 0, 8)); // rows 16 apart
    expectAddressed(Tensor.zeros(cpu, [2, 1, 3, 1, 4], 'f32')); // size-1 dims ignored
    const cube = Tensor.zeros(cpu, [4, 6, 5, 8], 'f32');
    expect(rowGroupLayout(cube.narrow(1, 0, 3).narrow(2, 0, 2))).toBeNull(); // three runs of strides
    expect(rowGroupLayout(Tensor.zeros(cpu, [4, 8], 'f32').transpose(0, 1))).toBeNull();
  });
});
