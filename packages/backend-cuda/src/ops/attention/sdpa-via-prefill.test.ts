/**
 * scaled_dot_product_attention's route to the flash prefill kernel, its host side run on the CPU backend: the per-batch
 * strided [rows, heads, D] views, the one-sequence cu_seqlens written by fills, the scale, GQA and the copy of each
 * [L, H, D] result into the output's [H, L, D] give what SDPA itself gives (the float64 CPU op), for permuted inputs,
 * several batch dims and L != S; calls the kernel does not take are declined with the reason. On a fake sm_90a device:
 * the FA3 kernel in place (dense-sdpa-fa3.ts): the tensor maps over the [B, H, S, D] storage, the output strides, one
 * launch over B H heads where the batch collapses and one per entry where not, no copy, and why it declines. The kernels
 * themselves are checked on the GPU host (attention-dense.gpu.test.ts, attention-fa3.gpu.test.ts).
 */
import { F, Tensor, type Backend, type OpCall } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fakeDevice } from '../../../test/fake-device.js';
import { expectClose, randCpu, tolOf, withTuning } from '../../../test/spine-helpers.js';
import { TENSOR_MAP_BYTES, type TensorMapSpec } from '../../tensor-map.js';
import { GenKernelCache } from '../gen-cache.js';
import { ptr } from '../launch/common.js';
import { DenseSdpa, type DenseSdpaAttrs } from './dense-sdpa.js';
import { runSdpaOnFa3, sdpaFa3Launches, type BhsdView } from './dense-sdpa-fa3.js';
import { sdpaViaPrefillDecline } from './plan.js';

function call(q: Tensor, k: Tensor, v: Tensor, attrs: Partial<DenseSdpaAttrs> = {}, mask: Tensor | null = null): OpCall<DenseSdpaAttrs> {
  const a: DenseSdpaAttrs = { dropout_p: 0, is_causal: false, scale: null, enable_gqa: true, ...attrs };
  const shape = [...q.shape.slice(0, -1), v.shape[v.rank - 1]!];
  return { op: {} as OpCall['op'], backend: q.backend, inputs: [q, k, v, mask], attrs: a, outputs: [{ shape, dtype: q.dtype }] } as unknown as OpCall<DenseSdpaAttrs>;
}

describe('SDPA on the flash prefill kernel: the host side (CPU backend)', () => {
  const cases: { name: string; q: number[]; kv: number[]; causal?: boolean; scale?: number; permute?: boolean; dtype?: 'bf16' | 'f16' }[] = [
    { name: 'non-causal, L != S, two batch entries', q: [2, 4, 24, 64], kv: [2, 4, 40, 64] },
    { name: 'causal L = S, GQA 8 : 2, an explicit scale', q: [1, 8, 33, 64], kv: [1, 2, 33, 64], causal: true, scale: 0.3 },
    { name: 'two batch dims, head dim 128, f16', q: [2, 3, 2, 17, 128], kv: [2, 3, 2, 21, 128], dtype: 'f16' },
    { name: '[B, L, H, D] permuted to [B, H, L, D] (read in place)', q: [2, 19, 4, 64], kv: [2, 26, 4, 64], permute: true },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const dtype = c.dtype ?? 'bf16';
      let [q, k, v] = [randCpu(c.q, dtype, 1), randCpu(c.kv, dtype, 2), randCpu(c.kv, dtype, 3)];
      if (c.permute) [q, k, v] = [q, k, v].map((t) => t.permute(0, 2, 1, 3)) as [Tensor, Tensor, Tensor];
      const sdpa = new DenseSdpa(new GenKernelCache());
      const cl = call(q, k, v, { is_causal: !!c.causal, scale: c.scale ?? null });
      expect(sdpa.prefillDecline(cl)).toBeNull();
      const got = sdpa.run(cl);
      expect(sdpa.lastPath).toBe('prefill');
      expect(sdpa.lastFa3Decline).toMatch(/no CUDA spine context/); // the CPU backend: the varlen op and a copy
      const want = F.scaledDotProductAttention(q, k, v, { is_causal: !!c.causal, scale: c.scale ?? null, enable_gqa: true });
      expect(got.shape).toEqual(want.shape);
      expectClose(got, want, tolOf(dtype), c.name);
      for (const t of [q, k, v, got, want]) t.dispose();
    });
  }
  it('declines, with the reason, what the prefill kernel does not take (the dense kernel runs those)', () => {
    const base = { dtype: 'bf16', D: 128, Dv: 128, L: 64, S: 64, causal: false, masked: false, dropout: 0, sameBatch: true, gqa: true };
    expect(sdpaViaPrefillDecline(base)).toBeNull();
    expect(sdpaViaPrefillDecline({ ...base, dtype: 'f32' })).toMatch(/dtype f32/);
    expect(sdpaViaPrefillDecline({ ...base, D: 96, Dv: 96 })).toMatch(/head dims 96/);
    expect(sdpaViaPrefillDecline({ ...base, Dv: 64 })).toMatch(/one head dim/);
    expect(sdpaViaPrefillDecline({ ...base, masked: true })).toMatch(/mask/);
    expect(sdpaViaPrefillDecline({ ...base, causal: true, S: 80 })).toMatch(/top-left/);
    expect(sdpaViaPrefillDecline({ ...base, S: 0 })).toMatch(/no keys/);
    expect(sdpaViaPrefillDecline({ ...base, sameBatch: false })).toMatch(/batch dims/);
    const [q, k, v] = [randCpu([1, 2, 8, 64], 'bf16', 1), randCpu([1, 2, 8, 64], 'bf16', 2), randCpu([1, 2, 8, 64], 'bf16', 3)];
    const sdpa = new DenseSdpa(new GenKernelCache());
    expect(sdpa.prefillDecline(call(q, k, v, {}, randCpu([8, 8], 'bf16', 4)))).toMatch(/mask/);
    sdpa.viaPrefill = false;
    expect(sdpa.prefillDecline(call(q, k, v))).toMatch(/viaPrefill is off/);
  });
});

// ------------------------------------------------------------------------------------- the FA3 kernel in place

/** A fake sm_90a device (its spine context on the backend, as CudaOps has it) recording the tensor maps it encodes. */
function hopper(opts: { arch?: string; refuse?: string } = {}) {
  const f = fakeDevice();
  const rt = f.ctx.runtime as unknown as Record<string, unknown>;
  const props = (rt.properties as () => object)();
  const specs: TensorMapSpec[] = [];
  rt.properties = () => ({ ...props, arch: opts.arch ?? 'sm_90a', sharedPerBlockOptin: 232448 });
  rt.tensorMapUnavailable = () => null;
  rt.tensorMap = (s: TensorMapSpec) => {
    if (opts.refuse) throw new Error(opts.refuse);
    specs.push(s);
    return new Uint8Array(TENSOR_MAP_BYTES).fill(specs.length);
  };
  (f.backend.ops as unknown as { spine: unknown }).spine = f.ctx;
  const count = () => (f.ctx.runtime as unknown as { launches: number }).launches;
  return { ...f, specs, count };
}

const empty = (b: Backend, shape: number[], dtype: 'bf16' | 'f16' = 'bf16') => Tensor.empty(b, shape, dtype);

describe('SDPA on the FA3 kernel in place (fake sm_90a device)', () => {
  it('Llama-3-8B causal 1x32x4096x128: one launch, maps over the BHSD storage (head stride S D), the output written through [H, L, D] strides, no copy', () => {
    const h = hopper();
    const [q, k, v] = [empty(h.backend, [1, 32, 4096, 128]), empty(h.backend, [1, 32, 4096, 128]), empty(h.backend, [1, 32, 4096, 128])];
    const sdpa = new DenseSdpa(new GenKernelCache());
    const before = h.count();
    const out = sdpa.run(call(q, k, v, { is_causal: true }));
    expect(sdpa.lastPath).toBe('fa3');
    expect(sdpa.lastFa3Decline).toBeNull();
    expect(h.launches.map((l) => l.entry)).toEqual(['fk_varlen_prefill_fa3']);
    expect(h.count() - before).toBe(3); // two fills of the one cu_seqlens [0, L] (L = S) and the kernel: no copy
    const l = h.launches[0]!;
    expect(l.grid).toEqual([32, 32 + 1, 1]);
    expect(h.specs.map((s) => [s.address, s.dims, s.stridesBytes, s.box])).toEqual([
      [ptr(q), [128, 32, 4096], [4096 * 256, 256], [64, 1, 64]],
      [ptr(k), [128, 32, 4096], [4096 * 256, 256], [64, 1, 128]],
      [ptr(v), [128, 32, 4096], [4096 * 256, 256], [64, 1, 128]],
    ]);
    // out, lse, cu_q, cu_k (the same tensor), num_seqs, total_q, n_q_heads, group, causal, window, scale_log2, out strides, sinks
    expect(l.args[3]).toBe(ptr(out));
    expect(l.args[5]).toBe(l.args[6]);
    expect(l.args.slice(7, 13)).toEqual([1, 4096, 32, 1, 1, 0]);
    expect(l.args[13]).toBeCloseTo(Math.LOG2E / Math.sqrt(128), 12);
    expect(l.args.slice(14)).toEqual([128, 4096 * 128, 0]);
  });

  it('GQA 32 : 8 (k / v [1, 8, 4096, 128]), non-causal head dim 64 with L != S (two cu_seqlens), an explicit scale', () => {
    const h = hopper();
    const sdpa = new DenseSdpa(new GenKernelCache());
    sdpa.run(call(empty(h.backend, [1, 32, 4096, 128]), empty(h.backend, [1, 8, 4096, 128]), empty(h.backend, [1, 8, 4096, 128]), { is_causal: true }));
    expect(h.specs[1]).toMatchObject({ dims: [128, 8, 4096], stridesBytes: [4096 * 256, 256] });
    expect(h.launches[0]!.args.slice(9, 11)).toEqual([32, 4]);
    const before = h.count();
    const q = empty(h.backend, [1, 24, 300, 64], 'f16');
    const kv = empty(h.backend, [1, 24, 700, 64], 'f16');
    const out = sdpa.run(call(q, kv, kv, { scale: 0.3 }));
    expect(sdpa.lastPath).toBe('fa3');
    expect(h.count() - before).toBe(5); // 2 x 2 fills, the kernel
    const l = h.launches.at(-1)!;
    expect(l.options).toEqual(['-DFK_T=__half', '-DFK_D=64']);
    expect(l.grid).toEqual([24, 3 + 1, 1]);
    expect(l.args[5]).not.toBe(l.args[6]);
    expect(l.args.slice(7, 13)).toEqual([1, 300, 24, 1, 0, 0]);
    expect(l.args[13]).toBeCloseTo(0.3 * Math.LOG2E, 12);
    expect(l.args.slice(14, 16)).toEqual([64, 300 * 64]);
    expect(l.args[3]).toBe(ptr(out));
    expect(h.specs.slice(-3).map((s) => [s.dims, s.stridesBytes])).toEqual([
      [[64, 24, 300], [300 * 128, 128]], [[64, 24, 700], [700 * 128, 128]], [[64, 24, 700], [700 * 128, 128]],
    ]);
  });

  it('B = 2 contiguous: the batch entries are more heads of one launch (2 H query heads over 2 Hkv key heads, group kept)', () => {
    const h = hopper();
    const sdpa = new DenseSdpa(new GenKernelCache());
    const [q, k] = [empty(h.backend, [2, 8, 200, 128]), empty(h.backend, [2, 2, 200, 128])];
    const out = sdpa.run(call(q, k, k, { is_causal: true }));
    expect(sdpa.lastPath).toBe('fa3');
    expect(h.launches).toHaveLength(1);
    const l = h.launches[0]!;
    expect(l.grid).toEqual([16, 2 + 1, 1]);
    expect(l.args.slice(9, 11)).toEqual([16, 4]); // query head b 8 + i reads key head (b 8 + i) / 4 = b 2 + i / 4
    expect(h.specs.map((s) => s.dims)).toEqual([[128, 16, 200], [128, 4, 200], [128, 4, 200]]);
    expect(h.specs.map((s) => s.stridesBytes)).toEqual([[200 * 256, 256], [200 * 256, 256], [200 * 256, 256]]);
    expect(l.args[3]).toBe(ptr(out));
    expect(l.args.slice(14, 16)).toEqual([128, 200 * 128]);
  });

  it('B = 2 of [B, L, H, D] storage permuted to [B, H, L, D]: one launch per batch entry (the batch does not collapse into the heads)', () => {
    const h = hopper();
    const sdpa = new DenseSdpa(new GenKernelCache());
    const [qs, ks] = [empty(h.backend, [2, 100, 4, 128]), empty(h.backend, [2, 100, 2, 128])];
    const [q, k] = [qs.permute(0, 2, 1, 3), ks.permute(0, 2, 1, 3)];
    const out = sdpa.run(call(q, k, k));
    expect(sdpa.lastPath).toBe('fa3');
    expect(h.launches.map((l) => l.grid)).toEqual([[4, 2, 1], [4, 2, 1]]);
    expect(h.specs.map((s) => [s.address - ptr(s === h.specs[0] || s === h.specs[3] ? qs : ks), s.dims, s.stridesBytes])).toEqual([
      [0, [128, 4, 100], [256, 4 * 256]], [0, [128, 2, 100], [256, 2 * 256]], [0, [128, 2, 100], [256, 2 * 256]],
      [100 * 4 * 256, [128, 4, 100], [256, 4 * 256]], [100 * 2 * 256, [128, 2, 100], [256, 2 * 256]], [100 * 2 * 256, [128, 2, 100], [256, 2 * 256]],
    ]);
    expect(h.launches.map((l) => l.args[3])).toEqual([ptr(out), ptr(out) + 4 * 100 * 256]);
    expect(h.launches.map((l) => l.args.slice(14, 16))).toEqual([[128, 100 * 128], [128, 100 * 128]]);
  });

  it('declines with the reason, launching nothing: another device, the tuning off, a refused map, a misaligned view; no spine', () => {
    const run = (h: ReturnType<typeof hopper>, q?: Tensor) => {
      const qq = q ?? empty(h.backend, [1, 4, 64, 128]);
      const k = empty(h.backend, [1, 4, 64, 128]);
      const out = empty(h.backend, [1, 4, 64, 128]);
      const before = h.count();
      const why = runSdpaOnFa3(h.ctx, { q: qq, k, v: k, out, outer: [1], heads: 4, kvHeads: 4, L: 64, S: 64, D: 128, causal: true, scale: 0.1 });
      expect(h.count(), `${why}: nothing launched`).toBe(before);
      return why;
    };
    expect(run(hopper({ arch: 'sm_80' }))).toMatch(/device target sm_80/);
    expect(withTuning('attention', { prefillFa3: false }, () => run(hopper()))).toMatch(/attention.prefillFa3 is off/);
    expect(run(hopper({ refuse: 'CUDA_ERROR_INVALID_VALUE' }))).toMatch(/a tensor map was refused: CUDA_ERROR_INVALID_VALUE/);
    const h = hopper();
    const odd = empty(h.backend, [1, 4, 64, 136]).narrow(3, 4, 128); // rows 272 B apart at an 8-byte offset
    expect(run(h, odd)).toMatch(/q at byte address .*16-byte aligned/);
    const cpu = randCpu([1, 2, 8, 64], 'bf16', 1);
    expect(runSdpaOnFa3(undefined, { q: cpu, k: cpu, v: cpu, out: cpu, outer: [1], heads: 2, kvHeads: 2, L: 8, S: 8, D: 64, causal: false, scale: 1 })).toMatch(/no CUDA spine/);
    cpu.dispose();
  });
});

describe('sdpaFa3Launches: the plan (pure)', () => {
  const view = (address: number, batch: number, heads: number, rows: number, D: number, perm = false): BhsdView =>
    perm
      ? { address, batch, heads, rows, batchStride: rows * heads * D, headStride: D, rowStride: heads * D }
      : { address, batch, heads, rows, batchStride: heads * rows * D, headStride: rows * D, rowStride: D };
  it('one head or one row: strides the TMA accepts (the packed ones), never a 0 stride', () => {
    const [l] = sdpaFa3Launches(view(0, 1, 1, 1, 64), view(4096, 1, 1, 5, 64), view(8192, 1, 1, 5, 64), view(16384, 1, 1, 1, 64), 64, 2);
    expect(l!.q).toEqual({ address: 0, rows: 1, heads: 1, rowStrideBytes: 128, headStrideBytes: 128 });
    expect(l!.k).toEqual({ address: 4096, rows: 5, heads: 1, rowStrideBytes: 128, headStrideBytes: 5 * 128 });
    expect(l!.out).toEqual({ address: 16384, rowStrideBytes: 128, headStrideBytes: 128 });
  });
  it('B = 3 with one head each: the batch stride is the head stride of one launch', () => {
    const ls = sdpaFa3Launches(view(0, 3, 1, 10, 128), view(1 << 20, 3, 1, 12, 128), view(1 << 21, 3, 1, 12, 128), view(1 << 22, 3, 1, 10, 128), 128, 2);
    expect(ls).toHaveLength(1);
    expect(ls[0]).toMatchObject({ qHeads: 3, group: 1, outRowStride: 128, outHeadStride: 10 * 128 });
    expect(ls[0]!.k).toEqual({ address: 1 << 20, rows: 12, heads: 3, rowStrideBytes: 256, headStrideBytes: 12 * 256 });
  });
  it('one permuted operand is enough for a launch per entry; each at its own batch offset', () => {
    const ls = sdpaFa3Launches(view(0, 2, 4, 10, 64), view(1 << 20, 2, 2, 10, 64, true), view(1 << 21, 2, 2, 10, 64), view(1 << 22, 2, 4, 10, 64), 64, 2);
    expect(ls.map((l) => [l.q.address, l.k.address, l.v.address, l.out.address, l.qHeads, l.group])).toEqual([
      [0, 1 << 20, 1 << 21, 1 << 22, 4, 2],
      [4 * 10 * 128, (1 << 20) + 10 * 2 * 128, (1 << 21) + 2 * 10 * 128, (1 << 22) + 4 * 10 * 128, 4, 2],
    ]);
    expect(ls[1]!.k).toMatchObject({ rowStrideBytes: 2 * 128, headStrideBytes: 128 });
  });
});
