/**
 * fk_paged_decode_mma with FK_EARLY_KV (ATTENTION_TUNING.decodeEarlyKv) as the engine's decode step runs it: rotary + KV
 * write of the step's token, then paged decode, captured in a CUDA graph with PDL launches, so the decode kernel's first
 * cache loads run before its wait while the write may still be running. The replay must give the bits of the same two
 * ops run eagerly without the switch, with the newest key in many tile positions (lengths around tile and split edges).
 * Before every run the newest slots hold other values than the step writes: a stale read changes the output.
 */
import { Rng, Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, gpu, intsCpu, randCpu, toGpu, withTuning } from '../../test/spine-helpers.js';
import { ATTENTION_TUNING } from './attention-plan.js';

const BLOCK = 16;
const [NQ, NK, D] = [32, 8, 128];

function cosSinGpu(maxPos: number): Tensor {
  const half = D / 2;
  const v = new Float64Array(maxPos * D);
  for (let p = 0; p < maxPos; p++) {
    for (let i = 0; i < half; i++) {
      const f = p * Math.pow(500000, (-2 * i) / D);
      v[p * D + i] = Math.cos(f);
      v[p * D + half + i] = Math.sin(f);
    }
  }
  return Tensor.fromArray(gpu(), v, [maxPos, D], 'bf16');
}

describe('paged decode with early cache loads (FK_EARLY_KV) after the step\'s KV write, in a PDL graph', () => {
  it('replayed graph = eager without the switch, bit for bit', G, () => {
    const b = gpu();
    const lens = [1, 16, 17, 63, 64, 65, 129, 300];
    const B = lens.length;
    const rng = new Rng(11);
    const perBlocks = lens.map((l) => Math.ceil(l / BLOCK));
    const maxBlocks = Math.max(...perBlocks);
    const numBlocks = perBlocks.reduce((a, n) => a + n, 0) + 2;
    const perm = rng.permutation(numBlocks);
    let next = 0;
    const table = lens.flatMap((_, s) => Array.from({ length: maxBlocks }, (_, j) => (j < perBlocks[s]! ? perm[next++]! : 0)));
    const slots = lens.map((l, s) => table[s * maxBlocks + Math.floor((l - 1) / BLOCK)]! * BLOCK + ((l - 1) % BLOCK));
    const bt = toGpu(intsCpu(table, [B, maxBlocks], 'i32'));
    const seqLens = toGpu(intsCpu(lens, [B], 'i32'));
    const positions = toGpu(intsCpu(lens.map((l) => l - 1), [B], 'i64'));
    const slotMapping = toGpu(intsCpu(slots, [B], 'i64'));
    const cosSin = cosSinGpu(512);
    const qkv = toGpu(randCpu([B, (NQ + 2 * NK) * D], 'bf16', 12));
    const kc0 = toGpu(randCpu([numBlocks, BLOCK, NK, D], 'bf16', 13));
    const vc0 = toGpu(randCpu([numBlocks, BLOCK, NK, D], 'bf16', 14));
    const kc = Tensor.empty(b, kc0.shape, 'bf16');
    const vc = Tensor.empty(b, vc0.shape, 'bf16');
    const out = Tensor.empty(b, [B, NQ, D], 'bf16');
    const qRot = Tensor.empty(b, [B, NQ, D], 'bf16'); // the step's rotated query, for the stale-cache check
    const q = qkv.narrow(1, 0, NQ * D);
    const k = qkv.narrow(1, NQ * D, NK * D);
    const v = qkv.view(B, NQ + 2 * NK, D).narrow(1, NQ + NK, NK);
    const step = () => {
      const fused = b.ops.rotaryStoreKvcache(positions, q, k, v, cosSin, D, true, kc, vc, slotMapping);
      let qr: Tensor;
      if (fused) {
        qr = fused[0];
        fused[1].dispose();
      } else {
        const [q2, k2] = b.ops.rotaryEmbedding(positions, q, k, cosSin, D, true);
        const k3 = k2!.view(B, NK, D);
        b.ops.storeKvcache_(k3, v, kc, vc, slotMapping);
        for (const t of [k2!, k3]) t.dispose();
        qr = q2;
      }
      const q3 = qr.view(B, NQ, D);
      const o = b.ops.pagedDecodeAttention(q3, kc, vc, bt, seqLens, 1 / Math.sqrt(D), 0);
      out.copy_(o);
      qRot.copy_(q3);
      for (const t of [qr, q3, o]) t.dispose();
    };
    const reset = () => {
      kc.copy_(kc0);
      vc.copy_(vc0);
      out.fill_(0);
    };
    const bits = () => Array.from(out.toFloat64Array());
    const run = (graph: boolean) => {
      reset();
      if (!graph) {
        step();
        return bits();
      }
      step(); // compiled and warmed eagerly first, as the engine does before it captures
      b.synchronize();
      const g = b.runtime.capture(step, { poolBytes: 64 << 20 });
      reset();
      g.replay();
      b.synchronize();
      g.destroy();
      return bits();
    };
    for (const tuning of [{}, { decodeMmaStages: 3, decodeSplitTokens: 64 }, { decodeMmaWarps: 2, decodeMmaStages: 4 }]) {
      const ref = withTuning(ATTENTION_TUNING, { ...tuning, decodeEarlyKv: false }, () => run(false));
      expect(ref.every((x) => Number.isFinite(x))).toBe(true);
      const early = withTuning(ATTENTION_TUNING, { ...tuning, decodeEarlyKv: true }, () => [run(false), run(true)]);
      expect(early[0], `eager ${JSON.stringify(tuning)}`).toEqual(ref);
      expect(early[1], `graph ${JSON.stringify(tuning)}`).toEqual(ref);
      // the test can fail: the same query over the caches as they were before the step's write gives other bits
      const stale = withTuning(ATTENTION_TUNING, { ...tuning, decodeEarlyKv: false }, () => {
        const o = b.ops.pagedDecodeAttention(qRot, kc0, vc0, bt, seqLens, 1 / Math.sqrt(D), 0);
        const r = Array.from(o.toFloat64Array());
        o.dispose();
        return r;
      });
      expect(stale).not.toEqual(ref);
    }
    for (const t of [bt, seqLens, positions, slotMapping, cosSin, q, k, v, qkv, kc0, vc0, kc, vc, out, qRot]) t.dispose();
  });
});
