import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, TaskCaseSchema, compareTensors, hostArray, toHostArray, toleranceFor, withContext, type ExecutionContext, type Module, type TaskCase, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { baselineRegistry } from '../../../index.js';
import { KV_BLOCK_SIZE, StoreKVCache, storeKvcacheReference, storeKvcacheTask } from './store_kvcache.js';

const task = storeKvcacheTask;
const backend = new CpuBackend();
const registry = baselineRegistry();
const ctxFor = (c: TaskCase): ExecutionContext => ({ backend, device: 0, dtype: c.dtype, registry });

describe('storeKvcacheReference (by hand)', () => {
  it('writes each token at block * 16 + offset, skips -1 and leaves every other slot as it was', () => {
    // key/value [T=3, nKv=1, D=2]; caches [2 blocks, 16, 1, 2] filled with -7
    const key = hostArray([3, 1, 2], [1, 2, 3, 4, 5, 6]);
    const value = hostArray([3, 1, 2], [10, 20, 30, 40, 50, 60]);
    const cache = () => hostArray([2, KV_BLOCK_SIZE, 1, 2], new Array(2 * 16 * 2).fill(-7));
    const slots = hostArray([3], [17, -1, 0]); // token 0 -> block 1 offset 1; token 1 is padding; token 2 -> block 0 offset 0
    const kIn = cache();
    const [k, v] = storeKvcacheReference(key, value, kIn, cache(), slots);
    const expectK = new Array(64).fill(-7);
    const expectV = new Array(64).fill(-7);
    expectK[17 * 2] = 1;
    expectK[17 * 2 + 1] = 2;
    expectK[0] = 5;
    expectK[1] = 6;
    expectV[17 * 2] = 10;
    expectV[17 * 2 + 1] = 20;
    expectV[0] = 50;
    expectV[1] = 60;
    expect([...k.data]).toEqual(expectK);
    expect([...v.data]).toEqual(expectV);
    expect(k.shape).toEqual([2, 16, 1, 2]);
    expect([...kIn.data].every((x) => x === -7)).toBe(true); // inputs untouched
  });

  it('keeps heads apart: head h of token t lands in head h of the slot', () => {
    const key = hostArray([1, 2, 1], [3, 4]);
    const value = hostArray([1, 2, 1], [5, 6]);
    const [k, v] = storeKvcacheReference(key, value, hostArray([1, 16, 2, 1]), hostArray([1, 16, 2, 1]), hostArray([1], [5]));
    expect([k.data[10], k.data[11], v.data[10], v.data[11]]).toEqual([3, 4, 5, 6]);
    expect(k.data.reduce((a, b) => a + Math.abs(b), 0)).toBe(7);
  });

  it('rejects a slot outside the cache', () => {
    expect(() => storeKvcacheReference(hostArray([1, 1, 1]), hostArray([1, 1, 1]), hostArray([1, 16, 1, 1]), hostArray([1, 16, 1, 1]), hostArray([1], [16]))).toThrow(/outside/);
  });
});

describe('store_kvcache metadata and inputs', () => {
  it('is registered under its id with the StoreKVCache baseline', () => {
    expect(registry.task('L1/store_kvcache')).toBe(task);
    expect(registry.resolve('L1/store_kvcache')).toBe(StoreKVCache);
    expect(task.className).toBe('StoreKVCache');
  });

  it('makeInputs: distinct in-range slots, exactly options.pad of them -1, caches pre-filled', () => {
    for (const c of task.cases.ci) {
      const inputs = task.makeInputs(c, ctxFor(c), new Rng(5));
      const slots = [...inputs[4]!.toFloat64Array()];
      const { T, NB } = c.dims as { T: number; NB: number };
      expect(inputs[4]!.dtype).toBe('i64');
      expect(slots.length).toBe(T);
      expect(slots.filter((s) => s === -1).length).toBe((c.options.pad as number | undefined) ?? 0);
      const real = slots.filter((s) => s !== -1);
      expect(new Set(real).size).toBe(real.length);
      expect(real.every((s) => Number.isInteger(s) && s >= 0 && s < NB * KV_BLOCK_SIZE)).toBe(true);
      // random, non-zero cache contents
      expect(inputs[2]!.toFloat64Array().some((x) => x !== 0)).toBe(true);
      expect([...inputs[2]!.shape]).toEqual([NB, KV_BLOCK_SIZE, c.dims.NKV, c.dims.D]);
    }
  });

  it('work: key+value read, slots read, non-padding tokens written; no flops', () => {
    const c = TaskCaseSchema.parse({ name: 'w', dtype: 'bf16', dims: { T: 10, NKV: 2, D: 4, NB: 1 }, init: [], options: { pad: 3 } });
    // read 2 * 10*2*4*2 = 320, slots 80, write 2 * 7*2*4*2 = 224
    expect(task.work(c)).toEqual({ bytes: 320 + 80 + 224, flops: 0 });
  });
});

describe('store_kvcache end to end on the CPU backend', () => {
  for (const c of task.cases.ci) {
    it(`${c.name} (${c.dtype}) matches the float64 reference for fresh seeds`, () => {
      for (const seed of [11, 12, 13]) {
        const ctx = ctxFor(c);
        const module = registry.createIn<Module>(ctx, task.id, ...c.init);
        const rng = new Rng(seed);
        const inputs = withContext(ctx, () => task.makeInputs(c, ctx, rng));
        const host = inputs.map((t) => (t ? toHostArray(t) : null));
        const result = (module as StoreKVCache).forward(...(inputs as [Tensor, Tensor, Tensor, Tensor, Tensor]));
        expect(result).toBeUndefined();
        const outputs = task.collectOutputs!(inputs, result);
        expect(outputs).toEqual([inputs[2], inputs[3]]);
        const expected = task.reference(host, new Map(), c);
        expect(expected.length).toBe(2);
        outputs.forEach((o, i) => {
          const cmp = compareTensors(o, expected[i]!, toleranceFor(task, o.dtype));
          expect(cmp.status, `${c.name} seed ${seed} output ${i}: ${cmp.detail ?? ''}`).toBe('PASSED');
          // a copy is exact in any dtype
          expect(cmp.maxAbsError).toBe(0);
        });
        // key, value and slots are not changed
        for (const i of [0, 1, 4]) expect([...inputs[i]!.toFloat64Array()]).toEqual([...host[i]!.data]);
        for (const t of inputs) t?.dispose();
      }
    });
  }
});
