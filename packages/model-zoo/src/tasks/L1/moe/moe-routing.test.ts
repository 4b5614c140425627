/**
 * The MoE routing tasks on hand-computed values: their float64 references, and the CPU modules on the same inputs
 * (dtypes included). The contract test (tasks/contract.test.ts) checks module against reference on random cases.
 */
import { Tensor, type Module } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { baselineRegistry } from '../../../index.js';
import { groupedTopkReference } from './grouped_topk.js';
import { moeAlignReference } from './moe_align.js';
import { topkSoftmaxReference } from './topk_softmax.js';

const registry = baselineRegistry();
const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry };
const make = <M extends Module>(id: string, ...args: unknown[]) => registry.createIn<M>(ctx, id, ...args);
const t = (data: number[], shape: number[], dtype: 'f32' | 'i32' = 'f32') => Tensor.fromArray(cpuBackend(), data, shape, dtype);
const close = (a: ArrayLike<number>, b: number[]) => b.forEach((v, i) => expect(a[i]).toBeCloseTo(v, 6));

describe('topk_softmax', () => {
  const logits = [0, Math.log(2), Math.log(5)]; // softmax: 1/8, 2/8, 5/8

  it('reference: the top-2 of softmax, renormalised or not', () => {
    const x = { shape: [1, 3], data: Float64Array.from(logits) };
    const [w, ids] = topkSoftmaxReference(x, 2, false);
    expect([...ids.data]).toEqual([2, 1]);
    close(w.data, [5 / 8, 2 / 8]);
    close(topkSoftmaxReference(x, 2, true)[0].data, [5 / 7, 2 / 7]);
  });

  it('module: the same values, f32 weights and i32 ids; a tie keeps the lower expert first', () => {
    const m = make<Module & { forward(x: Tensor): [Tensor, Tensor] }>('L1/topk_softmax', 2, true);
    const [w, ids] = m.forward(t([...logits, 1, 1, 0], [2, 3]));
    expect([w.dtype, ids.dtype]).toEqual(['f32', 'i32']);
    expect([...ids.toFloat64Array()]).toEqual([2, 1, 0, 1]);
    close(w.toFloat64Array(), [5 / 7, 2 / 7, 0.5, 0.5]);
  });
});

describe('moe_align', () => {
  // slots (token, k) flattened: 0:e0 1:e2 | 2:e2 3:e1 | 4:e0 5:e2; 3 experts, block 2
  const ids = [0, 2, 2, 1, 0, 2];
  const want = { sorted: [0, 4, 3, 6, 1, 2, 5, 6, 6, 6], experts: [0, 1, 2, 2, -1], post: [8] };

  it('reference: slots grouped by expert, each run padded to the block with T*K, one expert per block', () => {
    const [sorted, experts, post] = moeAlignReference({ shape: [3, 2], data: Float64Array.from(ids) }, 2, 3);
    expect({ sorted: [...sorted.data], experts: [...experts.data], post: [...post.data] }).toEqual(want);
  });

  it("module: the same, as i32; ids outside the experts (-1: another rank's) are in no block, as in the reference", () => {
    const m = make<Module & { forward(x: Tensor): Tensor[] }>('L1/moe_align', 2, 3);
    const out = m.forward(t(ids, [3, 2], 'i32'));
    expect(out.map((o) => o.dtype)).toEqual(['i32', 'i32', 'i32']);
    expect({ sorted: [...out[0]!.toFloat64Array()], experts: [...out[1]!.toFloat64Array()], post: [...out[2]!.toFloat64Array()] }).toEqual(want);
    // slots 0:e0 1:e3 (none) | 2:-1 (none) 3:e1
    const skipped = { sorted: [0, 4, 3, 4, 4, 4, 4, 4], experts: [0, 1, -1, -1], post: [4] };
    const got = m.forward(t([0, 3, -1, 1], [2, 2], 'i32'));
    expect({ sorted: [...got[0]!.toFloat64Array()], experts: [...got[1]!.toFloat64Array()], post: [...got[2]!.toFloat64Array()] }).toEqual(skipped);
    const [rs, re, rp] = moeAlignReference({ shape: [2, 2], data: Float64Array.from([0, 3, -1, 1]) }, 2, 3);
    expect({ sorted: [...rs.data], experts: [...re.data], post: [...rp.data] }).toEqual(skipped);
  });
});

describe('grouped_topk', () => {
  // softmax scores 0.1 0.4 | 0.3 0.2 in 2 groups of 2
  const logits = [1, 4, 3, 2].map(Math.log);
  const opts = { topk: 2, renormalize: true, numExpertGroup: 2, topkGroup: 1, scoringFunc: 'softmax' as const, routedScalingFactor: 1 };

  it('reference: only the best group competes (plain top-2 would take experts 1 and 2)', () => {
    const [w, ids] = groupedTopkReference({ shape: [1, 4], data: Float64Array.from(logits) }, null, opts);
    expect([...ids.data]).toEqual([1, 0]);
    close(w.data, [0.8, 0.2]);
  });

  it('reference with a correction bias: groups by their two best biased scores, weights from the unbiased ones, scaled', () => {
    const bias = { shape: [4], data: Float64Array.from([0, 0, 0.2, 0.2]) };
    const [w, ids] = groupedTopkReference({ shape: [1, 4], data: Float64Array.from(logits) }, bias, { ...opts, routedScalingFactor: 2 });
    expect([...ids.data]).toEqual([2, 3]);
    close(w.data, [1.2, 0.8]);
  });

  it('module: the same two answers', () => {
    const m = make<Module & { forward(h: Tensor, g: Tensor, b?: Tensor | null): [Tensor, Tensor] }>('L1/grouped_topk', 2, true, 2, 1);
    const [w, ids] = m.forward(t([0, 0], [1, 2]), t(logits, [1, 4]), null);
    expect([...ids.toFloat64Array()]).toEqual([1, 0]);
    close(w.toFloat64Array(), [0.8, 0.2]);
    const mb = make<Module & { forward(h: Tensor, g: Tensor, b?: Tensor | null): [Tensor, Tensor] }>('L1/grouped_topk', 2, true, 2, 1, 'softmax', 2);
    const [wb, idsb] = mb.forward(t([0, 0], [1, 2]), t(logits, [1, 4]), t([0, 0, 0.2, 0.2], [4]));
    expect([...idsb.toFloat64Array()]).toEqual([2, 3]);
    close(wb.toFloat64Array(), [1.2, 0.8]);
  });

  it('module: leaves nothing allocated but its two outputs (it runs once per MoE layer and step)', () => {
    const live = () => (cpuBackend() as unknown as { memoryStats(): { liveStorages: number } }).memoryStats().liveStorages;
    const m = make<Module & { forward(h: Tensor, g: Tensor, b?: Tensor | null): [Tensor, Tensor] }>('L1/grouped_topk', 2, true, 2, 1, 'sigmoid', 2.5);
    const [h, g, b] = [t([0, 0, 0], [3, 1]), t([0.1, 2, -1, 0.5, 1, 1, 0, 3, 2, -2, 0.3, 0.7], [3, 4]), t([0, 0.1, 0.2, 0], [4])];
    for (const bias of [null, b]) {
      const before = live();
      const outs = m.forward(h, g, bias);
      expect(live() - before, bias ? 'with a correction bias' : 'without').toBe(2);
      for (const o of outs) o.dispose();
      expect(live()).toBe(before);
    }
  });
});
