import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, TaskCaseSchema, compareTensors, hostArray, toHostArray, toleranceFor, withContext, type ExecutionContext, type HostArray, type Module, type TaskCase, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { baselineRegistry } from '../../../index.js';
import { FlashAttnDecode, decodeSeqLens, pagedDecodeAttentionReference, pagedDecodeAttentionTask } from './paged_decode_attention.js';
import { KV_BLOCK_SIZE } from '../kvcache/store_kvcache.js';
import { varlenPrefillAttentionReference } from './varlen_prefill_attention.js';

const task = pagedDecodeAttentionTask;
const backend = new CpuBackend();
const registry = baselineRegistry();
const ctxFor = (c: TaskCase): ExecutionContext => ({ backend, device: 0, dtype: c.dtype, registry });

/** A cache [NB, 16, nKv, D] whose token values come from fn(block, offset, head, d). */
function cacheOf(NB: number, nKv: number, D: number, fn: (block: number, offset: number, head: number, d: number) => number): HostArray {
  const a = hostArray([NB, KV_BLOCK_SIZE, nKv, D]);
  for (let b = 0; b < NB; b++) for (let o = 0; o < 16; o++) for (let h = 0; h < nKv; h++) for (let d = 0; d < D; d++) a.data[((b * 16 + o) * nKv + h) * D + d] = fn(b, o, h, d);
  return a;
}

describe('pagedDecodeAttentionReference (by hand)', () => {
  it('two keys with scores 0 and ln 3 weigh their values 1/4 and 3/4', () => {
    // nQ = nKv = 1, D = 2; the sequence lives in block 1 (block 0 holds junk that must not be read)
    const q = hostArray([1, 1, 2], [1, 0]);
    const k = cacheOf(2, 1, 2, (b, o, _h, d) => (b === 1 && o === 1 && d === 0 ? Math.log(3) : b === 0 ? 100 : 0));
    const v = cacheOf(2, 1, 2, (b, o, _h, d) => (b === 1 && o === 0 ? [4, 0][d]! : b === 1 && o === 1 ? [0, 8][d]! : 1000));
    const out = pagedDecodeAttentionReference(q, k, v, hostArray([1, 1], [1]), hostArray([1], [2]), 1);
    expect(out.shape).toEqual([1, 1, 2]);
    expect(out.data[0]).toBeCloseTo(1, 12); // 1/4 * 4
    expect(out.data[1]).toBeCloseTo(6, 12); // 3/4 * 8
  });

  it('scale multiplies the scores: q.k = 2 ln 3 with scale 1/2 gives the same 1/4, 3/4', () => {
    const q = hostArray([1, 1, 1], [2]);
    const k = cacheOf(1, 1, 1, (_b, o) => (o === 1 ? Math.log(3) : 0));
    const v = cacheOf(1, 1, 1, (_b, o) => [4, 8][o] ?? 99);
    const out = pagedDecodeAttentionReference(q, k, v, hostArray([1, 1], [0]), hostArray([1], [2]), 0.5);
    expect(out.data[0]).toBeCloseTo(7, 12);
  });

  it('GQA: query head h reads kv head floor(h / (nQ / nKv)); one key returns its value exactly', () => {
    // nQ = 4, nKv = 2, D = 1, seq len 1 at block 0 offset 0: out[h] = V[kv head of h]
    const q = hostArray([1, 4, 1], [0.3, -2, 5, 1]);
    const k = cacheOf(1, 2, 1, () => 0.5);
    const v = cacheOf(1, 2, 1, (_b, o, h) => (o === 0 ? [10, 20][h]! : 999));
    const out = pagedDecodeAttentionReference(q, k, v, hostArray([1, 1], [0]), hostArray([1], [1]), 1);
    expect([...out.data]).toEqual([10, 10, 20, 20]);
  });

  it('follows the block table across a block boundary; a sliding window keeps the last w tokens', () => {
    // 17 tokens: 0..15 in block 2, token 16 in block 0; V of token j = j, zero query -> uniform weights
    const table = hostArray([1, 2], [2, 0]);
    const tokenOf = (b: number, o: number) => (b === 2 ? o : b === 0 && o === 0 ? 16 : 1e6);
    const k = cacheOf(3, 1, 1, () => 0.25);
    const v = cacheOf(3, 1, 1, tokenOf);
    const q = hostArray([1, 1, 1], [0]);
    expect(pagedDecodeAttentionReference(q, k, v, table, hostArray([1], [17]), 1).data[0]).toBeCloseTo(8, 12); // mean 0..16
    expect(pagedDecodeAttentionReference(q, k, v, table, hostArray([1], [17]), 1, 4).data[0]).toBeCloseTo(14.5, 12); // mean 13..16
    expect(pagedDecodeAttentionReference(q, k, v, table, hostArray([1], [17]), 1, 1).data[0]).toBeCloseTo(16, 12); // only itself
    expect(pagedDecodeAttentionReference(q, k, v, table, hostArray([1], [17]), 1, 100).data[0]).toBeCloseTo(8, 12); // window > L
  });

  it('batches are independent: each sequence reads only its own table row and length', () => {
    const k = cacheOf(2, 1, 1, () => 0);
    const v = cacheOf(2, 1, 1, (b, o) => b * 100 + o);
    const q = hostArray([2, 1, 1], [0, 0]);
    const out = pagedDecodeAttentionReference(q, k, v, hostArray([2, 1], [1, 0]), hostArray([2], [3, 1]), 1);
    expect(out.data[0]).toBeCloseTo(101, 12); // mean of 100, 101, 102
    expect(out.data[1]).toBeCloseTo(0, 12);
  });
});

/** Gather each sequence's K/V out of the paged cache into packed [sum L, nKv, D] (for the varlen cross-check). */
function packSequences(kCache: HostArray, vCache: HostArray, tables: HostArray, lens: HostArray): { k: HostArray; v: HostArray; cuK: HostArray } {
  const [, , nKv, D] = kCache.shape as number[] as [number, number, number, number];
  const MB = tables.shape[1]!;
  const total = lens.data.reduce((a, b) => a + b, 0);
  const k = hostArray([total, nKv, D]);
  const v = hostArray([total, nKv, D]);
  const cu = [0];
  let row = 0;
  lens.data.forEach((L, b) => {
    for (let j = 0; j < L; j++, row++) {
      const slot = tables.data[b * MB + Math.floor(j / 16)]! * 16 + (j % 16);
      for (let x = 0; x < nKv * D; x++) {
        k.data[row * nKv * D + x] = kCache.data[slot * nKv * D + x]!;
        v.data[row * nKv * D + x] = vCache.data[slot * nKv * D + x]!;
      }
    }
    cu.push(row);
  });
  return { k, v, cuK: hostArray([cu.length], cu) };
}

describe('paged decode == varlen prefill with q_len 1 (independent formulations)', () => {
  for (const c of task.cases.ci) {
    it(`${c.name}: same outputs on the same gathered K/V`, () => {
      for (const seed of [3, 4]) {
        const inputs = task.makeInputs(c, ctxFor(c), new Rng(seed)).map((t) => (t ? toHostArray(t) : null));
        const [q, kC, vC, tables, lens, sinks] = inputs as [HostArray, HostArray, HostArray, HostArray, HostArray, HostArray | null];
        const window = (c.init[4] as number | undefined) ?? 0;
        const decode = pagedDecodeAttentionReference(q, kC, vC, tables, lens, c.init[2] as number, window, sinks);
        const { k, v, cuK } = packSequences(kC, vC, tables, lens);
        const B = q.shape[0]!;
        const cuQ = hostArray([B + 1], [...Array(B + 1).keys()]);
        const prefill = varlenPrefillAttentionReference(q, k, v, cuQ, cuK, c.init[2] as number, true, window, sinks);
        expect(prefill.shape).toEqual(decode.shape);
        let maxDiff = 0;
        decode.data.forEach((x, i) => (maxDiff = Math.max(maxDiff, Math.abs(x - prefill.data[i]!))));
        expect(maxDiff).toBeLessThan(1e-12);
      }
    });
  }
});

describe('paged_decode_attention metadata and inputs', () => {
  it('is registered with the FlashAttnDecode baseline', () => {
    expect(registry.resolve('L1/paged_decode_attention')).toBe(FlashAttnDecode);
    expect(task.className).toBe('FlashAttnDecode');
    expect(FlashAttnDecode.length).toBe(4); // slidingWindow has a default
  });

  it('seq lens: (1, S) always present, other pairs sum to S + 1, values in [1, S]', () => {
    const rng = new Rng(9);
    for (const [B, S] of [[1, 50], [2, 40], [5, 33], [8, 2048]] as const) {
      const lens = decodeSeqLens(B, S, rng);
      expect(lens.length).toBe(B);
      expect(lens.every((L) => L >= 1 && L <= S)).toBe(true);
      expect(lens.reduce((a, b) => a + b, 0)).toBe(Math.floor(B / 2) * (S + 1) + (B % 2) * S);
      if (B >= 2) expect(lens).toContain(1);
      expect(lens).toContain(S);
    }
  });

  it('makeInputs: consistent paged cache (distinct blocks, tables cover the lengths, i32 metadata)', () => {
    for (const c of task.cases.ci) {
      for (const seed of [1, 2, 3]) {
        const inputs = task.makeInputs(c, ctxFor(c), new Rng(seed));
        const { B, MB, NB, S } = c.dims as Record<string, number>;
        expect(inputs[3]!.dtype).toBe('i32');
        expect(inputs[4]!.dtype).toBe('i32');
        const tables = inputs[3]!.toFloat64Array();
        const lens = [...inputs[4]!.toFloat64Array()];
        const used = new Set<number>();
        lens.forEach((L, b) => {
          expect(L >= 1 && L <= S!).toBe(true);
          for (let i = 0; i < Math.ceil(L / 16); i++) {
            const blk = tables[b * MB! + i]!;
            expect(blk >= 0 && blk < NB!).toBe(true);
            expect(used.has(blk)).toBe(false);
            used.add(blk);
          }
        });
        if (B! >= 2) expect(lens).toContain(1);
        expect(lens.some((L) => L > 16)).toBe(true); // crosses a block boundary
      }
    }
  });

  it('work: 4 * nQ * D flops per (query head, key); K and V read once per kv head', () => {
    const c = TaskCaseSchema.parse({ name: 'w', dtype: 'bf16', dims: { B: 2, NQ: 4, NKV: 2, D: 8, S: 10, MB: 1, NB: 3 }, init: [4, 8, 0.3, 2] });
    // keys = 1 + 10 = 11; bytes: q + out 2*2*4*8*2 = 256, K/V 2*11*2*8*2 = 704, tables 8, lens 8
    expect(task.work(c)).toEqual({ bytes: 256 + 704 + 8 + 8, flops: 4 * 4 * 8 * 11 });
    // window 3: keys = min(1,3) + min(10,3) = 4
    const w = TaskCaseSchema.parse({ ...c, init: [4, 8, 0.3, 2, 3] });
    expect(task.work(w).flops).toBe(4 * 4 * 8 * 4);
  });
});

describe('paged_decode_attention end to end on the CPU backend', () => {
  for (const c of task.cases.ci) {
    it(`${c.name} (${c.dtype}) matches the float64 reference for fresh seeds`, () => {
      for (const seed of [21, 22, 23]) {
        const ctx = ctxFor(c);
        const module = registry.createIn<Module>(ctx, task.id, ...c.init);
        const inputs = withContext(ctx, () => task.makeInputs(c, ctx, new Rng(seed)));
        const host = inputs.map((t) => (t ? toHostArray(t) : null));
        const out = (module as FlashAttnDecode).forward(...(inputs as [Tensor, Tensor, Tensor, Tensor, Tensor]));
        expect([...out.shape]).toEqual([c.dims.B, c.dims.NQ, c.dims.D]);
        expect(out.dtype).toBe(c.dtype);
        const [expected] = task.reference(host, new Map(), c);
        const cmp = compareTensors(out, expected!, toleranceFor(task, out.dtype));
        expect(cmp.status, `${c.name} seed ${seed}: ${cmp.detail ?? ''} maxAbs ${cmp.maxAbsError}`).toBe('PASSED');
        for (const t of [...inputs, out]) t?.dispose();
      }
    });
  }
});

describe('attention sinks (gpt-oss): a per-head logit in the softmax denominator, no value', () => {
  it('reference by hand: scores 0 and ln 3 with sink ln 4 weigh the values 1/8 and 3/8; another head without sink mass', () => {
    // nQ 2 over nKv 1, D 2; sinks [ln 4, -inf-like]: head 0 gets exp sum 1 + 3 + 4, head 1 1 + 3 + e^-50
    const q = hostArray([1, 2, 2], [1, 0, 1, 0]);
    const k = cacheOf(1, 1, 2, (_b, o, _h, d) => (o === 1 && d === 0 ? Math.log(3) : 0));
    const v = cacheOf(1, 1, 2, (_b, o, _h, d) => (o === 0 ? [4, 0][d]! : o === 1 ? [0, 8][d]! : 1000));
    const out = pagedDecodeAttentionReference(q, k, v, hostArray([1, 1], [0]), hostArray([1], [2]), 1, 0, hostArray([2], [Math.log(4), -50]));
    expect(out.data[0]).toBeCloseTo(0.5, 12); // 1/8 * 4
    expect(out.data[1]).toBeCloseTo(3, 12); // 3/8 * 8
    expect(out.data[2]).toBeCloseTo(1, 10);
    expect(out.data[3]).toBeCloseTo(6, 10);
  });

  it('the CPU op with sinks equals the reference on random inputs, and differs from the same call without them', () => {
    const rng = new Rng(11);
    const c = TaskCaseSchema.parse(task.cases.ci.find((x) => x.name === 'sinks-gqa-window8-f32'));
    withContext(ctxFor(c), () => {
      const m = registry.create<Module & { forward(...a: (Tensor | null)[]): Tensor }>('L1/paged_decode_attention', ...c.init);
      const inputs = task.makeInputs(c, ctxFor(c), rng);
      const got = m.forward(...inputs);
      const [ref] = task.reference(inputs.map((t) => (t ? toHostArray(t) : null)), new Map(), c);
      expect(compareTensors(toHostArray(got), ref!, toleranceFor(task, 'f32')).status).toBe('PASSED');
      // the same call without sinks differs: the sink mass is real
      const plain = m.forward(...inputs.slice(0, 5));
      const a = got.toFloat64Array();
      const b = plain.toFloat64Array();
      expect(a.some((x, i) => Math.abs(x - b[i]!) > 1e-3)).toBe(true);
      for (const t of [got, plain, ...inputs]) t?.dispose();
    });
  });
});

describe("valueHeadSize (MLA's absorbed decode: the latent rows are keys, their first kv_lora_rank dims values)", () => {
  it('reference by hand: the output keeps the first valueDim dims of the weighted values', () => {
    const q = hostArray([1, 1, 2], [1, 0]);
    const k = cacheOf(1, 1, 2, (_b, o, _h, d) => (o === 1 && d === 0 ? Math.log(3) : 0));
    const v = cacheOf(1, 1, 2, (_b, o, _h, d) => (o === 0 ? [4, 0][d]! : o === 1 ? [0, 8][d]! : 1000));
    const out = pagedDecodeAttentionReference(q, k, v, hostArray([1, 1], [0]), hostArray([1], [2]), 1, 0, null, 1);
    expect(out.shape).toEqual([1, 1, 1]);
    expect(out.data[0]).toBeCloseTo(1, 12); // 1/4 * 4
  });

  it('the module over one latent cache given as both caches: the reference with valueDim, the first dims of the whole-row call', () => {
    // the tiny Kimi shape: 4 heads on one 20-wide row (latent 16 + rope 4)
    const c = TaskCaseSchema.parse({ name: 'latent', dtype: 'f32', dims: { B: 3, NQ: 4, NKV: 1, D: 20, S: 40, MB: 3, NB: 12 }, init: [4, 20, 0.2, 1, 0, 16] });
    withContext(ctxFor(c), () => {
      const narrow = registry.create<FlashAttnDecode>('L1/paged_decode_attention', ...c.init);
      const whole = registry.create<FlashAttnDecode>('L1/paged_decode_attention', ...c.init.slice(0, 5));
      const [q, cache, , bt, lens] = task.makeInputs(c, ctxFor(c), new Rng(5)) as Tensor[];
      const got = narrow.forward(q!, cache!, cache!, bt!, lens!);
      expect([...got.shape]).toEqual([3, 4, 16]);
      const host = [q!, cache!, cache!, bt!, lens!].map((t) => toHostArray(t));
      const [ref] = task.reference([...host, null], new Map(), c);
      expect(ref!.shape).toEqual([3, 4, 16]);
      expect(compareTensors(toHostArray(got), ref!, toleranceFor(task, 'f32')).status).toBe('PASSED');
      const all = whole.forward(q!, cache!, cache!, bt!, lens!);
      const firstDims = all.narrow(2, 0, 16).contiguous();
      expect([...got.toFloat64Array()]).toEqual([...firstDims.toFloat64Array()]);
      for (const t of [got, all, firstDims, q, cache, bt, lens]) t?.dispose();
    });
  });

  it('rejects a value width outside 1..headSize; work counts P.V over the value width only', () => {
    const make = (dv: number) => () => withContext(ctxFor(task.cases.ci[0]!), () => registry.create('L1/paged_decode_attention', 4, 20, 0.2, 1, 0, dv));
    expect(make(21)).toThrow(/valueHeadSize 21 must be an integer in 1..headSize \(20\)/);
    expect(make(0)).toThrow(/valueHeadSize 0/);
    const c = TaskCaseSchema.parse({ name: 'w', dtype: 'bf16', dims: { B: 2, NQ: 4, NKV: 1, D: 8, S: 10, MB: 1, NB: 3 }, init: [4, 8, 0.3, 1, 0, 6] });
    // keys 11; bytes: q 2*4*8*2 = 128, out 2*4*6*2 = 96, K + V 11*(8 + 6)*2 = 308, tables 8, lens 8
    expect(task.work(c)).toEqual({ bytes: 128 + 96 + 308 + 8 + 8, flops: 2 * 4 * (8 + 6) * 11 });
  });
});
