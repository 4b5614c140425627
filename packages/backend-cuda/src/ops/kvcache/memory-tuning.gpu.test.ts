/**
 * Launch-shape knobs of two memory-bound kernels the kernel bench puts below the copy-bandwidth target (run 10:
 * rotary T4096 66%, T16384 76%; kv store T4096 52%, T16384 76%): rotary.blocksPerSm (0 = one block per token)
 * and kvStore.tokensPerBlock (FK_TPB). Each setting must give bit-identical outputs to the default (the same
 * per-element math, only the work split differs; the default is checked against float64 in rotary/kvcache.gpu.test),
 * and prints `kernel-speed:` lines timed inside a CUDA graph with the inputs out of L2, to set the defaults from.
 * Runs with `dist/gpu-host/run-gpu-tests memory-tuning`.
 */
import { Tensor } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G, gpu, graphMs, intsCpu, measureCopy, printedAfterAll, randCpu, toGpu, withTuning } from '../../../test/spine-helpers.js';
import { cudaTuning } from '../../tuning/load.js';

const [NQ, NK, D, MAXPOS] = [32, 8, 128, 8192];
const ROTARY_SETTINGS = [0, 4, 8, 16];
const KV_SETTINGS = [2, 4, 8];

function sameBits(a: Tensor, b: Tensor, what: string): void {
  const x = a.toFloat64Array();
  const y = b.toFloat64Array();
  for (let i = 0; i < x.length; i++) {
    if (!Object.is(x[i], y[i])) throw new Error(`${what}: element ${i} is ${x[i]}, the default gives ${y[i]}`);
  }
}

/** Positions and a cos/sin cache for T tokens (random positions below MAXPOS). */
function rotaryInputs(T: number, seed: number) {
  const pos = toGpu(intsCpu(Array.from({ length: T }, (_, i) => (i * 7919 + seed) % MAXPOS), [T]));
  const cache = toGpu(randCpu([MAXPOS, D], 'bf16', seed + 1, 0.7));
  return { pos, cache };
}

describe('rotary: blocks per SM (rotary.blocksPerSm)', () => {
  const lines = printedAfterAll();
  it('bf16 neox, Llama-3-8B heads: every setting gives the default bits (T 1, 37, 1000)', G, () => {
    const b = gpu();
    for (const T of [1, 37, 1000]) {
      const { pos, cache } = rotaryInputs(T, T);
      const q = toGpu(randCpu([T, NQ * D], 'bf16', 10 + T));
      const k = toGpu(randCpu([T, NK * D], 'bf16', 20 + T));
      const [q0, k0] = withTuning('rotary', { blocksPerSm: 0 }, () => b.ops.rotaryEmbedding(pos, q, k, cache, D, true));
      for (const blocksPerSm of ROTARY_SETTINGS.slice(1)) {
        const [q1, k1] = withTuning('rotary', { blocksPerSm }, () => b.ops.rotaryEmbedding(pos, q, k, cache, D, true));
        sameBits(q1, q0, `T${T} blocksPerSm ${blocksPerSm} query`);
        sameBits(k1!, k0!, `T${T} blocksPerSm ${blocksPerSm} key`);
        q1.dispose();
        k1!.dispose();
      }
      for (const t of [q0, k0!, q, k, pos, cache]) t.dispose();
    }
  });

  it('speed at T 4096 and 16384 (printed, not asserted)', G, () => {
    const b = gpu();
    const { gbs: copyGBs } = measureCopy(64 * 1024 * 1024);
    for (const T of [4096, 16384]) {
      const { pos, cache } = rotaryInputs(T, 3);
      const bytes = 2 * T * (NQ + NK) * D * 2; // q and k read and written, bf16
      const copies = Math.max(1, Math.ceil((256 << 20) / (bytes / 2)));
      const qs = Array.from({ length: copies }, () => Tensor.empty(b, [T, NQ * D], 'bf16').fill_(0.5));
      const ks = Array.from({ length: copies }, () => Tensor.empty(b, [T, NK * D], 'bf16').fill_(0.25));
      const inner = Math.max(4, copies);
      for (const blocksPerSm of ROTARY_SETTINGS) {
        const ms = withTuning('rotary', { blocksPerSm }, () =>
          graphMs((i) => {
            const [qo, ko] = b.ops.rotaryEmbedding(pos, qs[i % copies]!, ks[i % copies]!, cache, D, true);
            qo.dispose();
            ko!.dispose();
          }, inner, 10, inner * (bytes / 2) + (64 << 20)),
        );
        const gbs = bytes / ms / 1e6;
        lines.push(`kernel-speed: rotary neox T${T} [blocksPerSm=${blocksPerSm}] ${(ms * 1e3).toFixed(1)} us = ${gbs.toFixed(0)} GB/s (${((gbs / copyGBs) * 100).toFixed(0)}% of copy; in a CUDA graph)`);
      }
      for (const t of [...qs, ...ks, pos, cache]) t.dispose();
    }
  });
});

describe('kv store: tokens per block (kvStore.tokensPerBlock)', () => {
  const lines = printedAfterAll();
  const BLOCK = 16;
  /** A cache of enough 16-token blocks, zeroed, and a slot per token (shuffled blocks, -1 for every 7th: padding). */
  function cacheAndSlots(T: number) {
    const blocks = Math.ceil(T / BLOCK) + 8;
    const order = Array.from({ length: blocks }, (_, i) => (i * 37 + 11) % blocks);
    const slots = Array.from({ length: T }, (_, t) => (t % 7 === 6 ? -1 : order[Math.floor(t / BLOCK)]! * BLOCK + (t % BLOCK)));
    return { blocks, slots: toGpu(intsCpu(slots, [T])) };
  }
  const zeros = (blocks: number) => Tensor.zeros(gpu(), [blocks, BLOCK, NK, D], 'bf16');

  it('bf16, Llama-3-8B kv heads: every setting writes the default bits (T 1, 37, 1000)', G, () => {
    const b = gpu();
    for (const T of [1, 37, 1000]) {
      const { blocks, slots } = cacheAndSlots(T);
      const key = toGpu(randCpu([T, NK, D], 'bf16', 30 + T));
      const value = toGpu(randCpu([T, NK, D], 'bf16', 40 + T));
      const [k0, v0] = [zeros(blocks), zeros(blocks)];
      withTuning('kvStore', { tokensPerBlock: 4 }, () => b.ops.storeKvcache_(key, value, k0, v0, slots));
      for (const tokensPerBlock of KV_SETTINGS.filter((x) => x !== 4)) {
        const [k1, v1] = [zeros(blocks), zeros(blocks)];
        withTuning('kvStore', { tokensPerBlock }, () => b.ops.storeKvcache_(key, value, k1, v1, slots));
        sameBits(k1, k0, `T${T} tokensPerBlock ${tokensPerBlock} key cache`);
        sameBits(v1, v0, `T${T} tokensPerBlock ${tokensPerBlock} value cache`);
        k1.dispose();
        v1.dispose();
      }
      for (const t of [k0, v0, key, value, slots]) t.dispose();
    }
  });

  it('speed at T 4096 and 16384 (printed, not asserted)', G, () => {
    const b = gpu();
    const { gbs: copyGBs } = measureCopy(64 * 1024 * 1024);
    for (const T of [4096, 16384]) {
      const { blocks, slots } = cacheAndSlots(T);
      const bytes = 2 * 2 * T * NK * D * 2; // key and value read, written to the caches, bf16
      const copies = Math.max(1, Math.ceil((256 << 20) / (bytes / 2)));
      const keys = Array.from({ length: copies }, () => Tensor.empty(b, [T, NK, D], 'bf16').fill_(0.5));
      const values = Array.from({ length: copies }, () => Tensor.empty(b, [T, NK, D], 'bf16').fill_(0.25));
      const [kc, vc] = [zeros(blocks), zeros(blocks)];
      for (const tokensPerBlock of KV_SETTINGS) {
        const ms = withTuning('kvStore', { tokensPerBlock }, () =>
          graphMs((i) => b.ops.storeKvcache_(keys[i % copies]!, values[i % copies]!, kc, vc, slots), Math.max(4, copies)),
        );
        const gbs = bytes / ms / 1e6;
        lines.push(`kernel-speed: store_kvcache T${T} [tokensPerBlock=${tokensPerBlock}] ${(ms * 1e3).toFixed(1)} us = ${gbs.toFixed(0)} GB/s (${((gbs / copyGBs) * 100).toFixed(0)}% of copy; in a CUDA graph)`);
      }
      for (const t of [...keys, ...values, kc, vc, slots]) t.dispose();
    }
  });
});
