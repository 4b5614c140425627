import { describe, expect, it } from 'vitest';
import { CpuBackend } from './backend.js';
import { cpu, tensor, Tensor, values } from './test-helpers.js';

/** The core Tensor view API, exercised over cpu storage. */
describe('Tensor views on the cpu backend', () => {
  const base = () => tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], [3, 4]);

  it('view / reshape share storage when contiguous, copy otherwise', () => {
    const t = base();
    const v = t.view(4, 3);
    expect(v.storage).toBe(t.storage);
    expect(v.toNested()).toEqual([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]);
    expect(t.view(-1).shape).toEqual([12]);
    const tr = t.transpose(0, 1);
    expect(tr.isContiguous()).toBe(false);
    expect(() => tr.view(12)).toThrow(/non-contiguous/);
    const r = tr.reshape(12);
    expect(r.storage).not.toBe(t.storage);
    expect(values(r)).toEqual([0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
    expect(() => t.view(5, 3)).toThrow(RangeError);
  });

  it('permute / transpose reorder dims without copying', () => {
    const t = tensor([...Array(24).keys()], [2, 3, 4]);
    const p = t.permute(2, 0, 1);
    expect(p.shape).toEqual([4, 2, 3]);
    expect(p.strides).toEqual([1, 12, 4]);
    expect(values(p.contiguous()).slice(0, 6)).toEqual([0, 4, 8, 12, 16, 20]);
    expect(t.transpose(-1, 0).shape).toEqual([4, 3, 2]);
  });

  it('narrow / slice / select address sub-ranges', () => {
    const t = base();
    expect(t.narrow(1, 1, 2).toNested()).toEqual([[1, 2], [5, 6], [9, 10]]);
    expect(t.slice(1, 0, undefined, 2).toNested()).toEqual([[0, 2], [4, 6], [8, 10]]);
    expect(t.slice(0, -2).toNested()).toEqual([[4, 5, 6, 7], [8, 9, 10, 11]]);
    expect(t.select(0, 1).toNested()).toEqual([4, 5, 6, 7]);
    expect(t.select(1, -1).toNested()).toEqual([3, 7, 11]);
    expect(() => t.narrow(0, 2, 2)).toThrow(RangeError);
  });

  it('unsqueeze / expand broadcast with stride 0', () => {
    const row = tensor([1, 2, 3], [3]);
    const e = row.unsqueeze(0).expand(2, 3);
    expect(e.strides).toEqual([0, 1]);
    expect(e.toNested()).toEqual([[1, 2, 3], [1, 2, 3]]);
    const col = row.unsqueeze(1).expand(-1, 2);
    expect(col.toNested()).toEqual([[1, 1], [2, 2], [3, 3]]);
    expect(() => row.expand(2, 4)).toThrow(/cannot expand/);
  });

  it('contiguous / clone copy strided data into fresh storage', () => {
    const t = base();
    const c = t.contiguous();
    expect(c.storage).toBe(t.storage);
    const s = t.slice(1, 1, undefined, 2);
    const sc = s.contiguous();
    expect(sc.isContiguous()).toBe(true);
    expect(sc.toNested()).toEqual([[1, 3], [5, 7], [9, 11]]);
    const k = t.clone();
    expect(k.storage).not.toBe(t.storage);
    k.fill_(0);
    expect(values(t)[5]).toBe(5);
  });

  it('fill_ and copy_ write through strided views only', () => {
    const t = base();
    t.slice(1, 0, undefined, 2).fill_(-1);
    expect(t.toNested()).toEqual([[-1, 1, -1, 3], [-1, 5, -1, 7], [-1, 9, -1, 11]]);
    t.select(0, 2).copy_(tensor([7, 7, 7, 7], [4], 'i32'));
    expect(values(t.select(0, 2))).toEqual([7, 7, 7, 7]);
    t.transpose(0, 1).copy_(tensor([...Array(12).keys()], [4, 3]));
    expect(t.toNested()).toEqual([[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]);
    expect(() => t.copy_(tensor([1, 2], [2]))).toThrow(/copy_/);
  });

  it('to(dtype) converts with rounding and to(backend) moves the bytes', () => {
    const t = tensor([1.5, -2.7, 1 / 3, 70000], [4], 'f64');
    expect(values(t.to('i32'))).toEqual([1, -2, 0, 70000]);
    expect(values(t.to('f16'))).toEqual([1.5, -2.69921875, 0.333251953125, Infinity]);
    expect(values(t.to('bool'))).toEqual([1, 1, 1, 1]);
    const other = new CpuBackend();
    const moved = t.transpose(0, 0).to(other);
    expect(moved.backend).toBe(other);
    expect(values(moved)).toEqual(values(t));
    expect(moved.dtype).toBe('f64');
  });

  it('dispose makes a tensor unusable', () => {
    const t = Tensor.zeros(cpu, [2], 'f32');
    t.dispose();
    expect(() => t.view(2)).toThrow(/disposed/);
    expect(() => cpu.ops.fill(t, 1)).toThrow(/disposed/);
  });
});
