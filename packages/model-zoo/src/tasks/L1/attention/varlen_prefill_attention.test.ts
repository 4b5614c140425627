import { CpuBackend } from '@fastkernels/backend-cpu';
import { F, Rng, TaskCaseSchema, UnsupportedOpError, compareTensors, hostArray, toHostArray, toleranceFor, withContext, type ExecutionContext, type Module, type TaskCase, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { baselineRegistry } from '../../../index.js';
import { FlashAttnVarlen, varlenPrefillAttentionReference, varlenPrefillAttentionTask, visiblePairs } from './varlen_prefill_attention.js';

const task = varlenPrefillAttentionTask;
const backend = new CpuBackend();
const registry = baselineRegistry();
const ctxFor = (c: TaskCase): ExecutionContext => ({ backend, device: 0, dtype: c.dtype, registry });

/** One sequence, one head, D = 1: q, k, v as plain lists. */
function oneHead(q: number[], k: number[], v: number[], opts: { causal?: boolean; window?: number; scale?: number } = {}): number[] {
  const out = varlenPrefillAttentionReference(
    hostArray([q.length, 1, 1], q),
    hostArray([k.length, 1, 1], k),
    hostArray([v.length, 1, 1], v),
    hostArray([2], [0, q.length]),
    hostArray([2], [0, k.length]),
    opts.scale ?? 1,
    opts.causal ?? true,
    opts.window ?? 0,
  );
  return [...out.data];
}

describe('varlenPrefillAttentionReference (by hand)', () => {
  it('causal prefill over two keys: query 0 sees key 0 only; query 1 weighs scores 0, ln 3 as 1/4, 3/4', () => {
    const out = oneHead([1, 1], [0, Math.log(3)], [4, 8]);
    expect(out[0]).toBeCloseTo(4, 12);
    expect(out[1]).toBeCloseTo(7, 12); // 4/4 + 3*8/4
  });

  it('non-causal: both queries see both keys', () => {
    const out = oneHead([1, 1], [0, Math.log(3)], [4, 8], { causal: false });
    expect(out[0]).toBeCloseTo(7, 12);
    expect(out[1]).toBeCloseTo(7, 12);
  });

  it('scale multiplies the scores', () => {
    const out = oneHead([2], [0, Math.log(3)], [4, 8], { causal: false, scale: 0.5 });
    expect(out[0]).toBeCloseTo(7, 12);
  });

  it('chunked prefill aligns q and k at the bottom right: with 2 queries over 3 keys, query 0 sees keys 0-1', () => {
    // zero queries -> uniform weights over the visible keys
    const out = oneHead([0, 0], [5, -3, 2], [1, 2, 6]);
    expect(out[0]).toBeCloseTo(1.5, 12); // mean(1, 2)
    expect(out[1]).toBeCloseTo(3, 12); // mean(1, 2, 6)
    expect(oneHead([0], [5, -3, 2], [1, 2, 6])[0]).toBeCloseTo(3, 12); // a one-token chunk sees the whole context
  });

  it('sliding window w keeps keys j > pos - w', () => {
    const out = oneHead([0, 0, 0], [1, 1, 1], [2, 4, 10], { window: 2 });
    expect(out[0]).toBeCloseTo(2, 12);
    expect(out[1]).toBeCloseTo(3, 12); // mean(2, 4)
    expect(out[2]).toBeCloseTo(7, 12); // mean(4, 10)
    const chunked = oneHead([0], [1, 1, 1, 1], [2, 4, 10, 20], { window: 3 }); // pos 3 sees keys 1..3
    expect(chunked[0]).toBeCloseTo(34 / 3, 12);
  });

  it('a query that sees no key (more queries than keys, causal) gives 0', () => {
    const out = oneHead([1, 1, 1], [0.5], [9]);
    expect(out).toEqual([0, 0, 9]);
  });

  it('GQA head mapping and sequence isolation: one key per sequence returns its value per kv head', () => {
    // 2 sequences (lq = lk = 1), nQ = 4, nKv = 2, D = 1
    const q = hostArray([2, 4, 1], [1, 2, 3, 4, 5, 6, 7, 8]);
    const k = hostArray([2, 2, 1], [0.1, 0.2, 0.3, 0.4]);
    const v = hostArray([2, 2, 1], [10, 20, 30, 40]);
    const cu = hostArray([3], [0, 1, 2]);
    const out = varlenPrefillAttentionReference(q, k, v, cu, cu, 1);
    expect([...out.data]).toEqual([10, 10, 20, 20, 30, 30, 40, 40]);
  });

  it('visiblePairs counts the mask', () => {
    expect(visiblePairs(4, 4, true, 0)).toBe(10);
    expect(visiblePairs(2, 5, true, 0)).toBe(9); // 4 + 5
    expect(visiblePairs(4, 4, true, 2)).toBe(7); // 1 + 2 + 2 + 2
    expect(visiblePairs(2, 3, false, 0)).toBe(6);
    expect(visiblePairs(3, 1, true, 0)).toBe(1); // two queries see nothing
  });
});

describe('varlen_prefill_attention metadata and inputs', () => {
  it('is registered with the FlashAttnVarlen baseline', () => {
    expect(registry.resolve('L1/varlen_prefill_attention')).toBe(FlashAttnVarlen);
    expect(FlashAttnVarlen.length).toBe(4); // causal and slidingWindow have defaults
  });

  it('makeInputs: cu_seqlens are i32 prefix sums of a shuffled order of the case\'s (lq, lk) pairs', () => {
    for (const c of task.cases.ci) {
      const pairs = new Set<string>();
      for (const seed of [1, 2, 3, 4, 5]) {
        const inputs = task.makeInputs(c, ctxFor(c), new Rng(seed));
        expect(inputs[3]!.dtype).toBe('i32');
        const cuQ = [...inputs[3]!.toFloat64Array()];
        const cuK = [...inputs[4]!.toFloat64Array()];
        expect(cuQ[0]).toBe(0);
        expect(cuK[0]).toBe(0);
        expect(cuQ.at(-1)).toBe(c.dims.TQ);
        expect(cuK.at(-1)).toBe(c.dims.TK);
        const got = cuQ.slice(1).map((x, i) => `${x - cuQ[i]!}/${cuK[i + 1]! - cuK[i]!}`);
        const want = (c.options.qLens as number[]).map((l, i) => `${l}/${(c.options.kLens as number[])[i]}`);
        expect([...got].sort()).toEqual([...want].sort());
        got.forEach((p) => expect(Number(p.split('/')[1]) >= Number(p.split('/')[0])).toBe(true));
        pairs.add(got.join(','));
      }
      if ((c.options.qLens as number[]).length > 2) expect(pairs.size).toBeGreaterThan(1); // the order is random
    }
  });

  it('work: 4 * nQ * D flops per visible (query head, key) pair', () => {
    const c = TaskCaseSchema.parse({
      name: 'w', dtype: 'bf16', dims: { TQ: 6, TK: 9, B: 2, 'B+1': 3, NQ: 4, NKV: 2, D: 8 }, init: [4, 8, 0.3, 2], options: { qLens: [4, 2], kLens: [4, 5] },
    });
    // pairs 10 + 9; bytes: q + out 2*6*4*8*2 = 768, k + v 2*9*2*8*2 = 576, cu 2*3*4 = 24
    expect(task.work(c)).toEqual({ bytes: 768 + 576 + 24, flops: 4 * 4 * 8 * 19 });
  });
});

describe('varlen_prefill_attention end to end on the CPU backend', () => {
  for (const c of task.cases.ci) {
    it(`${c.name} (${c.dtype}) matches the float64 reference for fresh seeds`, () => {
      for (const seed of [31, 32, 33]) {
        const ctx = ctxFor(c);
        const module = registry.createIn<Module>(ctx, task.id, ...c.init);
        const inputs = withContext(ctx, () => task.makeInputs(c, ctx, new Rng(seed)));
        const host = inputs.map((t) => (t ? toHostArray(t) : null));
        const out = (module as FlashAttnVarlen).forward(...(inputs as [Tensor, Tensor, Tensor, Tensor, Tensor]));
        expect([...out.shape]).toEqual([c.dims.TQ, c.dims.NQ, c.dims.D]);
        expect(out.dtype).toBe(c.dtype);
        const [expected] = task.reference(host, new Map(), c);
        const cmp = compareTensors(out, expected!, toleranceFor(task, out.dtype));
        expect(cmp.status, `${c.name} seed ${seed}: ${cmp.detail ?? ''} maxAbs ${cmp.maxAbsError}`).toBe('PASSED');
        for (const t of [...inputs, out]) t?.dispose();
      }
    });
  }
});

describe('varlen attention sinks (gpt-oss)', () => {
  it('reference by hand: one visible key of score 0 and sink 0 halve its value; the sink follows the window and causal mask', () => {
    const out = varlenPrefillAttentionReference(hostArray([2, 1, 1], [1, 1]), hostArray([2, 1, 1], [0, 0]), hostArray([2, 1, 1], [4, 8]), hostArray([2], [0, 2]), hostArray([2], [0, 2]), 1, true, 1, hostArray([1], [0]));
    expect(out.data[0]).toBeCloseTo(2, 12); // query 0: key 0 and the sink, 1/2 * 4
    expect(out.data[1]).toBeCloseTo(4, 12); // window 1: query 1 sees key 1 only, 1/2 * 8
  });

  it('a backend with only the Ops method (no op kernel) refuses sinks instead of dropping them', () => {
    const c = TaskCaseSchema.parse(task.cases.ci.find((x) => x.name === 'sinks-gqa-bf16'));
    const rng = new Rng(5);
    withContext(ctxFor(c), () => {
      const [q, k, v, cq, ck, sinks] = task.makeInputs(c, ctxFor(c), rng) as Tensor[];
      const saved = backend.opKernels.get('varlen_prefill_attention')!;
      const table = backend.opKernels;
      table.register('varlen_prefill_attention', saved.kernel, () => 'test: no kernel');
      try {
        expect(() => F.varlenPrefillAttention(q!, k!, v!, cq!, ck!, { scale: 0.1, causal: true, sinks })).toThrow(UnsupportedOpError);
        // without sinks the Ops route still serves it
        F.varlenPrefillAttention(q!, k!, v!, cq!, ck!, { scale: 0.1, causal: true }).dispose();
      } finally {
        table.register('varlen_prefill_attention', saved.kernel, saved.supports);
      }
      const short = sinks!.narrow(0, 0, 3);
      expect(() => F.varlenPrefillAttention(q!, k!, v!, cq!, ck!, { scale: 0.1, sinks: short })).toThrow(/varlen_prefill_attention: sinks \[3\] must be \[4\] \(one logit per query head\)/);
      for (const t of [q, k, v, cq, ck, sinks, short]) t!.dispose();
    });
  });
});
