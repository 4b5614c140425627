/**
 * Ops.rotaryStoreKvcache on CUDA (fk_rotary_store_kv, ops/rotary/rotary-kv.ts): with rotary.fuseKvStore on, one launch
 * must give the bits of rotaryEmbedding followed by storeKvcache_ (q, k and both caches, atol 0), on q / k / v as the
 * Llama attention layer passes them (strided slices of one QKV output), and match the float64 CPU backend within the
 * dtype's tolerance. With the switch off, or a layout it does not fuse, it declines (null) and writes nothing.
 */
import { Rng, Tensor, type DType } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G, cosSinCpu, cpu, expectClose, gpu, intsCpu, poison, randCpu, toGpu, tolOf, withTuning } from '../../../test/spine-helpers.js';
import { indexChecksOn, setIndexChecks } from '../launch/common.js';
import { cudaTuning } from '../../tuning/load.js';

const FUSED = { fuseKvStore: true };
const BLOCK = 16;

/** Every element the same, NaN nowhere, -0 and +0 told apart. */
function expectSameBits(actual: Tensor, expected: Tensor, label: string): void {
  const a = actual.toFloat64Array();
  const e = expected.toFloat64Array();
  if (a.length !== e.length) throw new Error(`${label}: ${a.length} elements vs ${e.length}`);
  const bad: string[] = [];
  for (let i = 0; i < a.length; i++) if (Number.isNaN(a[i]!) || !Object.is(a[i], e[i])) bad.push(`[${i}] ${a[i]} vs ${e[i]}`);
  if (bad.length) throw new Error(`${label}: ${bad.length} of ${a.length} differ: ${bad.slice(0, 8).join(', ')}`);
}

interface Case {
  T: number;
  nq: number;
  nk: number;
  head: number;
  rot: number;
  neox: boolean;
  dtype: DType;
  /** dtype of the cos / sin cache (default: the activations') */
  cacheDType?: DType;
}

/**
 * A step's inputs on the CPU backend: one QKV output [T, (nq + 2 nk) * head] with q, k as narrowed columns and v as a
 * [T, nk, head] slice of its head view (the layer's strided views), positions, a slot mapping with padding (-1) over
 * shuffled slots, and caches full of random values.
 */
function stepInputs(c: Case, seed: number, outOfRange = false) {
  const { T, nq, nk, head } = c;
  const rng = new Rng(seed);
  const maxPos = 4096;
  const numBlocks = Math.ceil(T / BLOCK) + 3;
  const perm = rng.permutation(numBlocks * BLOCK);
  const slots = Array.from({ length: T }, (_, t) => (t % 4 === 2 ? -1 : perm[t]!));
  const positions = Array.from({ length: T }, (_, t) => (t === 1 ? maxPos - 1 : rng.int(0, maxPos)));
  if (outOfRange) {
    positions[0] = maxPos + 7; // a zero row in k, and the zeros stored in its slot
    slots[T - 1] = numBlocks * BLOCK + 5; // past the cache: nothing stored
  }
  const qkv = randCpu([T, (nq + 2 * nk) * head], c.dtype, seed + 1);
  return {
    qkv,
    positions: intsCpu(positions, [T], T % 2 ? 'i64' : 'i32'),
    slots: intsCpu(slots, [T], T % 3 ? 'i64' : 'i32'),
    cache: cosSinCpu(maxPos, c.rot, c.cacheDType ?? c.dtype, 500000),
    kCache: randCpu([numBlocks, BLOCK, nk, head], c.dtype, seed + 2),
    vCache: randCpu([numBlocks, BLOCK, nk, head], c.dtype, seed + 3),
  };
}

/** q, k, v of a QKV tensor as the attention layer slices them. */
function qkvViews(qkv: Tensor, c: Case): [Tensor, Tensor, Tensor] {
  const { T, nq, nk, head } = c;
  return [qkv.narrow(1, 0, nq * head), qkv.narrow(1, nq * head, nk * head), qkv.view(T, nq + 2 * nk, head).narrow(1, nq + nk, nk)];
}

/** outOfRange: a position past the cos / sin cache and a slot past the caches (index checks off; no CPU comparison:
 * the CPU backend rejects both). */
function checkCase(c: Case, seed: number, outOfRange = false): void {
  const x = stepInputs(c, seed, outOfRange);
  const g = { qkv: toGpu(x.qkv), positions: toGpu(x.positions), slots: toGpu(x.slots), cache: toGpu(x.cache) };
  const [q, k, v] = qkvViews(g.qkv, c);
  const label = `${JSON.stringify(c)} seed ${seed}`;

  // the unfused pair
  const [kcPair, vcPair] = [toGpu(x.kCache), toGpu(x.vCache)];
  const [qPair, kPair] = gpu().ops.rotaryEmbedding(g.positions, q, k, g.cache, c.head, c.neox);
  const k3 = kPair!.view(c.T, c.nk, c.head);
  gpu().ops.storeKvcache_(k3, v, kcPair, vcPair, g.slots);

  // the fused op from the same starting caches, its outputs allocated over NaN
  const [kcFused, vcFused] = [toGpu(x.kCache), toGpu(x.vCache)];
  poison(c.T * c.nq * c.head, c.T * c.nk * c.head);
  const fused = withTuning('rotary', FUSED, () => gpu().ops.rotaryStoreKvcache!(g.positions, q, k, v, g.cache, c.head, c.neox, kcFused, vcFused, g.slots));
  if (!fused) throw new Error(`${label}: declined`);
  const [qFused, kFused] = fused;
  if (qFused.shape.join() !== q.shape.join() || kFused.shape.join() !== k.shape.join()) throw new Error(`${label}: shapes ${qFused.shape} / ${kFused.shape}`);
  expectSameBits(qFused, qPair, `${label} q`);
  expectSameBits(kFused, kPair!, `${label} k`);
  expectSameBits(kcFused, kcPair, `${label} kCache`);
  expectSameBits(vcFused, vcPair, `${label} vCache`);

  // and the float64 CPU backend's composition
  if (!outOfRange) {
    const [kcCpu, vcCpu] = [x.kCache.clone(), x.vCache.clone()];
    const [qc, kc, vc] = qkvViews(x.qkv, c);
    const [qCpu, kCpu] = cpu().ops.rotaryStoreKvcache!(x.positions, qc, kc, vc, x.cache, c.head, c.neox, kcCpu, vcCpu, x.slots)!;
    const tol = tolOf(c.dtype);
    expectClose(qFused, qCpu, tol, `${label} q vs cpu`);
    expectClose(kFused, kCpu, tol, `${label} k vs cpu`);
    expectClose(kcFused, kcCpu, tol, `${label} kCache vs cpu`);
    expectClose(vcFused, vcCpu, tol, `${label} vCache vs cpu`);
  }

  for (const t of [qPair, kPair!, k3, kcPair, vcPair, qFused, kFused, kcFused, vcFused, q, k, v, ...Object.values(g)]) t.dispose();
}

describe('rotaryStoreKvcache: the bits of rotaryEmbedding + storeKvcache_ in one launch', () => {
  const shapes: [string, Omit<Case, 'T' | 'neox' | 'dtype'>, number[]][] = [
    ['Llama-3-8B heads', { nq: 32, nk: 8, head: 128, rot: 128 }, [1, 3, 37, 256]],
    ['odd heads (scalar / short vectors)', { nq: 3, nk: 1, head: 40, rot: 40 }, [1, 37]],
    ['partial rotary', { nq: 4, nk: 2, head: 64, rot: 32 }, [3]],
  ];
  for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
    for (const neox of [true, false]) {
      for (const [name, shape, Ts] of shapes) {
        it(`${dtype} ${neox ? 'neox' : 'gptj'} ${name}, T ${Ts.join(' / ')}`, G, () => {
          for (const T of Ts) checkCase({ ...shape, T, neox, dtype }, T + shape.head);
        });
      }
    }
  }

  it('an f32 cos / sin cache with bf16 activations; prefill-sized T = 4096 (fewer blocks than tokens)', G, () => {
    checkCase({ T: 5, nq: 32, nk: 8, head: 128, rot: 128, neox: true, dtype: 'bf16', cacheDType: 'f32' }, 1);
    checkCase({ T: 4096, nq: 32, nk: 8, head: 128, rot: 128, neox: true, dtype: 'bf16' }, 2);
  });

  it('a position past the cos / sin cache and a slot past the caches: the pair\'s bits (zeros stored, nothing stored); a RangeError with index checks on', G, () => {
    const c: Case = { T: 6, nq: 32, nk: 8, head: 128, rot: 128, neox: true, dtype: 'bf16' };
    const was = indexChecksOn();
    setIndexChecks(false);
    try {
      for (const neox of [true, false]) checkCase({ ...c, neox }, 3, true);
    } finally {
      setIndexChecks(was);
    }
    const x = stepInputs(c, 3, true);
    const g = { qkv: toGpu(x.qkv), positions: toGpu(x.positions), slots: toGpu(x.slots), cache: toGpu(x.cache), kc: toGpu(x.kCache), vc: toGpu(x.vCache) };
    const [q, k, v] = qkvViews(g.qkv, c);
    setIndexChecks(true);
    try {
      withTuning('rotary', FUSED, () => gpu().ops.rotaryStoreKvcache!(g.positions, q, k, v, g.cache, c.head, c.neox, g.kc, g.vc, g.slots));
      throw new Error('no RangeError with index checks on');
    } catch (e) {
      if (!(e instanceof RangeError) || !/rotaryStoreKvcache: a position is out of range/.test(e.message)) throw e;
    } finally {
      setIndexChecks(was);
      for (const t of [q, k, v, ...Object.values(g)]) t.dispose();
    }
  });

  it('captured in a CUDA graph (a PDL launch where available): each replay writes the same bits', G, () => {
    const c: Case = { T: 1, nq: 32, nk: 8, head: 128, rot: 128, neox: true, dtype: 'bf16' };
    const x = stepInputs(c, 9);
    const g = { qkv: toGpu(x.qkv), positions: toGpu(x.positions), slots: toGpu(x.slots), cache: toGpu(x.cache) };
    const [q, k, v] = qkvViews(g.qkv, c);
    const [kcPair, vcPair] = [toGpu(x.kCache), toGpu(x.vCache)];
    const [qPair, kPair] = gpu().ops.rotaryEmbedding(g.positions, q, k, g.cache, c.head, c.neox);
    const k3 = kPair!.view(c.T, c.nk, c.head);
    gpu().ops.storeKvcache_(k3, v, kcPair, vcPair, g.slots);
    const [kc0, vc0] = [toGpu(x.kCache), toGpu(x.vCache)];
    const [kc, vc] = [toGpu(x.kCache), toGpu(x.vCache)];
    const b = gpu();
    const captured: { outs: [Tensor, Tensor] | null } = { outs: null };
    const fused = () => b.ops.rotaryStoreKvcache!(g.positions, q, k, v, g.cache, c.head, c.neox, kc, vc, g.slots);
    const graph = withTuning('rotary', FUSED, () => {
      for (const t of fused()!) t.dispose(); // compile (and queue the capture build) outside the capture
      b.synchronize();
      return b.runtime.capture(() => {
        captured.outs = fused();
      }, { poolBytes: 16 << 20 });
    });
    try {
      if (!captured.outs) throw new Error('declined in the capture');
      const [qg, kg] = captured.outs;
      for (let r = 0; r < 3; r++) {
        qg.fill_(NaN);
        kg.fill_(NaN);
        kc.copy_(kc0);
        vc.copy_(vc0);
        graph.replay();
        expectSameBits(qg, qPair, `replay ${r} q`);
        expectSameBits(kg, kPair!, `replay ${r} k`);
        expectSameBits(kc, kcPair, `replay ${r} kCache`);
        expectSameBits(vc, vcPair, `replay ${r} vCache`);
      }
    } finally {
      for (const t of [...(captured.outs ?? []), qPair, kPair!, k3, kcPair, vcPair, kc0, vc0, kc, vc, q, k, v, ...Object.values(g)]) t.dispose();
      graph.destroy();
    }
  });
});

describe('rotaryStoreKvcache declines (null, nothing written) where it does not fuse', () => {
  const c: Case = { T: 3, nq: 4, nk: 2, head: 64, rot: 64, neox: true, dtype: 'bf16' };
  function declines(patch: { fuseKvStore: boolean }, cacheOf: (t: Tensor) => Tensor, label: string): void {
    const x = stepInputs(c, 4);
    const g = { qkv: toGpu(x.qkv), positions: toGpu(x.positions), slots: toGpu(x.slots), cache: toGpu(x.cache) };
    const [q, k, v] = qkvViews(g.qkv, c);
    const kc = cacheOf(toGpu(x.kCache));
    const vc = cacheOf(toGpu(x.vCache));
    const before = [kc.toFloat64Array(), vc.toFloat64Array()];
    const r = withTuning('rotary', patch, () => gpu().ops.rotaryStoreKvcache!(g.positions, q, k, v, g.cache, c.head, c.neox, kc, vc, g.slots));
    if (r !== null) throw new Error(`${label}: expected null, got tensors`);
    expectClose(kc, { shape: kc.shape, data: before[0]! }, { atol: 0, rtol: 0 }, `${label}: kCache untouched`);
    expectClose(vc, { shape: vc.shape, data: before[1]! }, { atol: 0, rtol: 0 }, `${label}: vCache untouched`);
    for (const t of [kc, vc, q, k, v, ...Object.values(g)]) t.dispose();
  }
  it('with rotary.fuseKvStore off', G, () => {
    declines({ fuseKvStore: false }, (t) => t, 'switch off');
  });
  it('caches of another dtype than the activations (storeKvcache_ converts)', G, () => {
    declines(FUSED, (t) => {
      const f = t.to('f32');
      t.dispose();
      return f;
    }, 'f32 caches');
  });
});
