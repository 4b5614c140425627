import { afterEach, describe, expect, it } from 'vitest';
import { roundToDType } from './dtype.js';
import { hostArray, toHostArray } from './host.js';
import { Tensor } from './tensor.js';
import { HostTestBackend, type HostStorage } from './test-support/host-backend.js';

let be = new HostTestBackend();
afterEach(() => {
  be = new HostTestBackend();
});

const arange = (n: number) => Array.from({ length: n }, (_, i) => i);
const refs = (t: Tensor) => (t.storage as HostStorage).refCount;

describe('Tensor construction', () => {
  it('fromArray / toNested / toFloat64Array', () => {
    const t = Tensor.fromArray(be, arange(6), [2, 3], 'f32');
    expect(t.shape).toEqual([2, 3]);
    expect(t.strides).toEqual([3, 1]);
    expect(t.offset).toBe(0);
    expect(t.rank).toBe(2);
    expect(t.numel).toBe(6);
    expect(t.itemsize).toBe(4);
    expect(t.isContiguous()).toBe(true);
    expect(t.toNested()).toEqual([[0, 1, 2], [3, 4, 5]]);
    expect([...t.toFloat64Array()]).toEqual(arange(6));
    expect(t.toString()).toBe('Tensor(f32[2, 3] on host-test:0)');
    expect(t.backend).toBe(be);
    expect(t.device).toBe(0);
  });

  it('fromArray rounds to the dtype', () => {
    const t = Tensor.fromArray(be, [0.1, 1 + 3 * 2 ** -8, 1e6], [3], 'bf16');
    expect([...t.toFloat64Array()]).toEqual([0.10009765625, 1 + 2 ** -6, 999424]);
    const e4 = Tensor.fromArray(be, [1e6, 460], [2], 'fp8e4m3');
    const v = e4.toFloat64Array();
    expect(v[0]).toBeNaN();
    expect(v[1]).toBe(448);
  });

  it('fromArray checks the element count', () => {
    expect(() => Tensor.fromArray(be, [1, 2, 3], [2, 2], 'f32')).toThrow(/3 values for shape \[2, 2\]/);
  });

  it('rank-0 tensors', () => {
    const t = Tensor.fromArray(be, [42], [], 'i32');
    expect(t.rank).toBe(0);
    expect(t.numel).toBe(1);
    expect(t.toNested()).toBe(42);
    expect(t.unsqueeze(0).toNested()).toEqual([42]);
  });

  it('zeros and empty with poison', () => {
    expect([...Tensor.zeros(be, [2, 2], 'f16').toFloat64Array()]).toEqual([0, 0, 0, 0]);
    const p = Tensor.empty(be, [3], 'f32', { poison: 0xff });
    expect([...p.toFloat64Array()].every(Number.isNaN)).toBe(true);
  });

  it('validates shape and strides', () => {
    const s = be.allocate(16, 0);
    expect(() => new Tensor({ storage: s, dtype: 'f32', shape: [2, 2], strides: [1] })).toThrow(/strides/);
    expect(() => new Tensor({ storage: s, dtype: 'f32', shape: [2, -1] })).toThrow(/invalid shape/);
    expect(() => new Tensor({ storage: s, dtype: 'f32', shape: [1.5] })).toThrow(/invalid shape/);
    // a failed construction takes no reference
    expect(s.refCount).toBe(1);
  });

  it('size()', () => {
    const t = Tensor.zeros(be, [2, 3, 4], 'f32');
    expect(t.size(0)).toBe(2);
    expect(t.size(-1)).toBe(4);
    expect(() => t.size(3)).toThrow(RangeError);
  });

  it('empty tensors', () => {
    const t = Tensor.zeros(be, [0, 3], 'f32');
    expect(t.numel).toBe(0);
    expect(t.toFloat64Array().length).toBe(0);
    expect(t.toNested()).toEqual([]);
    expect(t.view(3, 0).shape).toEqual([3, 0]);
    expect(t.clone().shape).toEqual([0, 3]);
    // an empty narrow of a contiguous tensor is contiguous (nothing to lay out), as in PyTorch
    const e = Tensor.zeros(be, [2, 3, 4], 'f32').narrow(2, 1, 0);
    expect(e.isContiguous()).toBe(true);
    expect(e.view(-1).shape).toEqual([0]);
    expect(e.reshape(3, 0).shape).toEqual([3, 0]);
  });
});

describe('Tensor views', () => {
  const base = () => Tensor.fromArray(be, arange(24), [2, 3, 4], 'f32');

  it('view / reshape with -1', () => {
    const t = base();
    const v = t.view(6, -1);
    expect(v.shape).toEqual([6, 4]);
    expect(v.storage).toBe(t.storage);
    expect(t.view([4, 6]).shape).toEqual([4, 6]);
    expect(t.reshape(-1).toNested()).toEqual(arange(24));
    expect(() => t.view(5, -1)).toThrow(/cannot infer -1/);
    expect(() => t.view(5, 5)).toThrow(/25 elements, need 24/);
    expect(() => t.view(0, -1)).toThrow(/cannot infer -1/);
  });

  it('view rejects more than one -1 and negative sizes', () => {
    const t = base();
    expect(() => t.view(-1, -1)).toThrow(/at most one -1/);
    expect(() => t.view(-2, -12)).toThrow(/invalid shape/);
    expect(() => t.reshape(2.5, -1)).toThrow(/invalid shape/);
  });

  it('view of a non-contiguous tensor throws; reshape copies', () => {
    const t = base().transpose(0, 2); // [4, 3, 2]
    expect(t.isContiguous()).toBe(false);
    expect(() => t.view(-1)).toThrow(/non-contiguous/);
    const r = t.reshape(-1);
    expect(r.storage).not.toBe(t.storage);
    expect(r.isContiguous()).toBe(true);
    const expected: number[] = [];
    for (let k = 0; k < 4; k++) for (let j = 0; j < 3; j++) for (let i = 0; i < 2; i++) expected.push(i * 12 + j * 4 + k);
    expect([...r.toFloat64Array()]).toEqual(expected);
    // the intermediate contiguous copy was released: only r holds the new storage
    expect(refs(r)).toBe(1);
  });

  it("view of a strided tensor follows torch's rule: dims split or merged only where their elements are evenly spaced", () => {
    // [T, q | k | v] of a fused projection: a narrow is [T, heads * d] with rows W apart; its per-head view needs no copy
    const T = 3;
    const [nq, nk, d] = [4, 2, 2];
    const W = (nq + 2 * nk) * d;
    const qkv = Tensor.fromArray(be, arange(T * W), [T, W], 'f32');
    const k = qkv.narrow(1, nq * d, nk * d);
    const k3 = k.view(T, nk, d);
    expect(k3.strides).toEqual([W, d, 1]);
    expect(k3.storage).toBe(qkv.storage);
    expect([...k3.toFloat64Array()]).toEqual([...k.toFloat64Array()]);
    expect(k3.view(T, nk * d).strides).toEqual([W, 1]); // and merged back
    expect(k3.view(T, nk, 1, d).strides).toEqual([W, d, d, 1]); // a size-1 dim takes any stride
    expect(() => k3.view(T * nk, d)).toThrow(/needs a copy/); // tokens are W apart, not nk * d
    // a transpose's dims are not evenly spaced together, but each alone splits
    const t = Tensor.fromArray(be, arange(24), [6, 4], 'f32').transpose(0, 1); // [4, 6]
    expect(t.view(4, 2, 3).strides).toEqual([1, 12, 4]);
    expect([...t.view(4, 2, 3).toFloat64Array()]).toEqual([...t.toFloat64Array()]);
    expect(() => t.view(24)).toThrow(/needs a copy/);
  });

  it('permute and transpose', () => {
    const t = base();
    const p = t.permute(2, 0, 1);
    expect(p.shape).toEqual([4, 2, 3]);
    expect(p.strides).toEqual([1, 12, 4]);
    expect(p.toNested()).toEqual([0, 1, 2, 3].map((k) => [0, 1].map((i) => [0, 1, 2].map((j) => i * 12 + j * 4 + k))));
    expect(t.permute([-1, 0, 1]).shape).toEqual([4, 2, 3]);
    expect(() => t.permute(0, 0, 1)).toThrow(/not a permutation/);
    expect(() => t.permute(0, 1)).toThrow(/not a permutation/);
    const tr = t.transpose(-1, 0);
    expect(tr.shape).toEqual([4, 3, 2]);
    expect(tr.strides).toEqual([1, 4, 12]);
    expect(t.transpose(1, 1).strides).toEqual(t.strides);
  });

  it('narrow', () => {
    const t = base();
    const n = t.narrow(2, 1, 2);
    expect(n.shape).toEqual([2, 3, 2]);
    expect(n.offset).toBe(1);
    expect(n.toNested()).toEqual([[[1, 2], [5, 6], [9, 10]], [[13, 14], [17, 18], [21, 22]]]);
    expect(t.narrow(1, -1, 1).toNested()).toEqual([[[8, 9, 10, 11]], [[20, 21, 22, 23]]]);
    expect(t.narrow(0, 2, 0).numel).toBe(0);
    expect(() => t.narrow(2, 3, 2)).toThrow(/out of range/);
    expect(() => t.narrow(2, 0, -1)).toThrow(/out of range/);
  });

  it('slice with steps and negative bounds', () => {
    const t = Tensor.fromArray(be, arange(10), [10], 'i32');
    expect(t.slice(0, 1, 8, 3).toNested()).toEqual([1, 4, 7]);
    expect(t.slice(0, -3).toNested()).toEqual([7, 8, 9]);
    expect(t.slice(0, 0, -8).toNested()).toEqual([0, 1]);
    expect(t.slice(0, 5, 2).numel).toBe(0);
    expect(t.slice(0, -100, 100, 4).toNested()).toEqual([0, 4, 8]);
    expect(t.slice(0, 9, 10, 5).toNested()).toEqual([9]);
    expect(() => t.slice(0, 0, 10, 0)).toThrow(/step/);
    expect(() => t.slice(0, 0, 10, 1.5)).toThrow(/step/);
    const m = base().slice(1, 0, 3, 2).slice(2, 1, undefined, 2);
    expect(m.shape).toEqual([2, 2, 2]);
    expect(m.toNested()).toEqual([[[1, 3], [9, 11]], [[13, 15], [21, 23]]]);
  });

  it('select', () => {
    const t = base();
    expect(t.select(0, 1).shape).toEqual([3, 4]);
    expect(t.select(0, 1).offset).toBe(12);
    expect(t.select(1, -1).toNested()).toEqual([[8, 9, 10, 11], [20, 21, 22, 23]]);
    expect(t.select(2, 3).select(0, 1).toNested()).toEqual([15, 19, 23]);
    expect(() => t.select(1, 3)).toThrow(/out of range/);
    expect(() => t.select(1, -4)).toThrow(/out of range/);
  });

  it('unsqueeze', () => {
    const t = base();
    expect(t.unsqueeze(0).shape).toEqual([1, 2, 3, 4]);
    expect(t.unsqueeze(0).isContiguous()).toBe(true);
    expect(t.unsqueeze(-1).shape).toEqual([2, 3, 4, 1]);
    expect(t.unsqueeze(-1).strides).toEqual([12, 4, 1, 1]);
    expect(t.unsqueeze(1).strides).toEqual([12, 12, 4, 1]);
    expect(t.unsqueeze(3).toNested()).toEqual((t.toNested() as number[][][]).map((a) => a.map((b) => b.map((c) => [c]))));
    expect(() => t.unsqueeze(5)).toThrow(RangeError);
    // unsqueeze of a transposed view keeps values right
    const tr = t.transpose(0, 2).unsqueeze(1);
    expect(tr.shape).toEqual([4, 1, 3, 2]);
    expect(tr.select(1, 0).toNested()).toEqual(t.transpose(0, 2).toNested());
  });

  it('expand', () => {
    const col = Tensor.fromArray(be, [1, 2, 3], [3, 1], 'f32');
    const e = col.expand(2, 3, 4);
    expect(e.shape).toEqual([2, 3, 4]);
    expect(e.strides).toEqual([0, 1, 0]);
    expect(e.toNested()).toEqual([0, 1].map(() => [1, 2, 3].map((v) => [v, v, v, v])));
    expect(col.expand([-1, 2]).shape).toEqual([3, 2]);
    expect(() => col.expand(4, 2)).toThrow(/cannot expand/);
    expect(() => col.expand(3)).toThrow(/fewer dims/);
    expect(e.isContiguous()).toBe(false);
    const c = e.contiguous();
    expect(c.isContiguous()).toBe(true);
    expect(c.toNested()).toEqual(e.toNested());
  });

  it('contiguous shares storage when already contiguous, copies otherwise', () => {
    const t = base();
    const c = t.contiguous();
    expect(c.storage).toBe(t.storage);
    const tt = t.transpose(0, 1).contiguous();
    expect(tt.storage).not.toBe(t.storage);
    expect(tt.strides).toEqual([8, 4, 1]);
    expect(tt.toNested()).toEqual(t.transpose(0, 1).toNested());
  });

  it('clone copies even when contiguous', () => {
    const t = base();
    const c = t.clone();
    expect(c.storage).not.toBe(t.storage);
    t.fill_(0);
    expect(c.toNested()).toEqual(base().toNested());
  });

  it('fill_ on a strided view only touches the view', () => {
    const t = base();
    t.select(2, 0).fill_(-1);
    const flat = [...t.toFloat64Array()];
    expect(flat).toEqual(arange(24).map((v) => (v % 4 === 0 ? -1 : v)));
    t.transpose(0, 1).narrow(0, 1, 1).fill_(7);
    expect(t.select(1, 1).toNested()).toEqual([[7, 7, 7, 7], [7, 7, 7, 7]]);
  });

  it('copy_ converts dtype through strided views and checks shapes', () => {
    const dst = Tensor.zeros(be, [4, 3], 'bf16');
    const src = Tensor.fromArray(be, arange(12).map((v) => v + 0.1), [3, 4], 'f64');
    dst.copy_(src.transpose(0, 1));
    expect(dst.toNested()).toEqual([0, 1, 2, 3].map((k) => [0, 1, 2].map((j) => roundToDType(j * 4 + k + 0.1, 'bf16'))));
    expect(() => dst.copy_(src)).toThrow(/copy_: shape \[3, 4\] into \[4, 3\]/);
  });

  it('copy_ from another backend goes through host bytes', () => {
    const other = new HostTestBackend('other');
    const src = Tensor.fromArray(other, [1, 2, 3, 4], [2, 2], 'f32');
    const dst = Tensor.zeros(be, [2, 2], 'f32');
    dst.copy_(src.transpose(0, 1));
    expect(dst.toNested()).toEqual([[1, 3], [2, 4]]);
    expect(other.liveStorages.size).toBe(1); // the staging copy was released
  });

  it('to(dtype) always copies and converts', () => {
    const t = Tensor.fromArray(be, [0.1, 1000, -3.5], [3], 'f32');
    const h = t.to('f16');
    expect(h.dtype).toBe('f16');
    expect([...h.toFloat64Array()]).toEqual([0.0999755859375, 1000, -3.5]);
    const same = t.to('f32');
    expect(same.storage).not.toBe(t.storage);
    const i = t.to('i32');
    expect([...i.toFloat64Array()]).toEqual([0, 1000, -3]);
    const e4 = t.to('fp8e4m3');
    expect(e4.toFloat64Array()[1]).toBeNaN();
  });

  it('to(backend) makes a contiguous copy there', () => {
    const other = new HostTestBackend('other');
    const t = Tensor.fromArray(be, arange(6), [2, 3], 'i64').transpose(0, 1);
    const o = t.to(other);
    expect(o.backend).toBe(other);
    expect(o.isContiguous()).toBe(true);
    expect(o.toNested()).toEqual([[0, 3], [1, 4], [2, 5]]);
  });

  it('toHostBytes of an offset view', () => {
    const t = Tensor.fromArray(be, [1, 2, 3, 4], [4], 'u8');
    expect([...t.narrow(0, 1, 2).toHostBytes()]).toEqual([2, 3]);
    expect([...t.slice(0, 0, 4, 2).toHostBytes()]).toEqual([1, 3]);
  });

  it('viewAs reinterprets bits with the same item size', () => {
    const t = Tensor.fromArray(be, [1, -2], [2], 'bf16');
    const u = t.viewAs('i16');
    expect(u.storage).toBe(t.storage);
    expect([...u.toFloat64Array()]).toEqual([0x3f80, 0xc000 - 0x10000]);
    const f16 = t.viewAs('f16');
    expect(f16.toFloat64Array()[0]).toBe(1.875); // 0x3F80 read as f16
    expect(() => t.viewAs('f32')).toThrow(/item size/);
    const e = Tensor.fromArray(be, [448], [1], 'fp8e4m3').viewAs('u8');
    expect(e.toNested()).toEqual([0x7e]);
  });

  it('hostArray / toHostArray', () => {
    const t = base().select(0, 1);
    const h = toHostArray(t);
    expect(h.shape).toEqual([3, 4]);
    expect([...h.data]).toEqual(arange(12).map((v) => v + 12));
    expect(hostArray([2]).data).toEqual(new Float64Array(2));
    expect(() => hostArray([2, 2], [1, 2, 3])).toThrow(/3 values for 4 elements/);
  });
});

describe('Tensor lifetime', () => {
  it('views retain the storage; dispose releases once', () => {
    const t = Tensor.zeros(be, [4, 4], 'f32');
    const s = t.storage as HostStorage;
    expect(s.refCount).toBe(1);
    const v1 = t.view(16);
    const v2 = t.transpose(0, 1);
    const v3 = v2.narrow(0, 1, 2);
    expect(s.refCount).toBe(4);
    t.dispose();
    t.dispose(); // idempotent
    expect(t.isDisposed).toBe(true);
    expect(s.refCount).toBe(3);
    expect(s.released).toBe(false);
    v1.dispose();
    v2.dispose();
    expect(v3.toNested()).toEqual([[0, 0, 0, 0], [0, 0, 0, 0]]);
    v3.dispose();
    expect(s.released).toBe(true);
    expect(be.liveStorages.size).toBe(0);
  });

  it('a disposed tensor cannot be used', () => {
    const t = Tensor.zeros(be, [2, 2], 'f32');
    t.dispose();
    expect(() => t.view(4)).toThrow(/disposed/);
    expect(() => t.fill_(1)).toThrow(/disposed/);
    expect(() => t.toFloat64Array()).toThrow(/disposed/);
    expect(() => t.clone()).toThrow(/disposed/);
    expect(() => t.contiguous()).toThrow(/disposed/);
    expect(() => t.to('f16')).toThrow(/disposed/);
    expect(() => t.viewAs('i32')).toThrow(/disposed/);
    expect(() => Tensor.zeros(be, [2, 2], 'f32').copy_(t)).toThrow(/disposed/);
  });

  it('Symbol.dispose releases at the end of a using block', () => {
    const t = Tensor.zeros(be, [3], 'f32');
    {
      using v = t.unsqueeze(0);
      expect(v.shape).toEqual([1, 3]);
      expect(be.liveStorages.size).toBe(1);
      expect((t.storage as HostStorage).refCount).toBe(2);
    }
    expect((t.storage as HostStorage).refCount).toBe(1);
    {
      using c = t.clone();
      expect(be.liveStorages.size).toBe(2);
      void c;
    }
    expect(be.liveStorages.size).toBe(1);
    t[Symbol.dispose]();
    expect(be.liveStorages.size).toBe(0);
  });

  it('temporary copies made by toFloat64Array / reshape / to() are released', () => {
    const t = Tensor.fromArray(be, arange(6), [2, 3], 'f32');
    const tr = t.transpose(0, 1);
    tr.toFloat64Array();
    tr.toHostBytes();
    const o = tr.to(new HostTestBackend('x'));
    expect(be.liveStorages.size).toBe(1);
    const r = tr.reshape(6);
    expect(be.liveStorages.size).toBe(2);
    r.dispose();
    o.dispose();
    tr.dispose();
    t.dispose();
    expect(be.liveStorages.size).toBe(0);
  });

  it('other ops are not in the fixture', () => {
    const t = Tensor.zeros(be, [2], 'f32');
    expect(() => be.ops.add(t, t)).toThrow(/not in this fixture/);
  });
});
