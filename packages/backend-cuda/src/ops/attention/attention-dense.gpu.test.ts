/**
 * scaled_dot_product_attention on the dense tensor-core kernel (kernels/attention_dense.cu) vs the float64 CPU backend,
 * through the op registry (CUDA must take its kernel): random shapes (batch, GQA head counts, L != S, one-warp short
 * queries) at head dims 32 to 256, bf16 and f16; causal (top-left) or not; a boolean mask and an additive bias broadcast
 * over batch / heads, with rows whose every key is masked (zeros, the CPU kernel's convention); [B, L, H, D] inputs
 * permuted to [B, H, L, D]; Dv != D; S = 0. Design §4's tolerances (ops-helpers.checkOp). On sm_90a the prefill route's
 * calls run on the FA3 kernel in place (dense-sdpa-fa3.ts: no layout copy; DenseSdpa.lastPath 'fa3'): [B, H, S, D] at
 * B 1 and 2 (the batch folded into the heads), GQA, causal and not, head dims 64 and 128, permuted views (a launch per
 * batch entry), and the route before it (attention.prefillFa3 off: the varlen op and a copy), all against float64.
 */
import { Rng, Tensor, callOp1, opRoute, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, gpu, poison, releasing, toGpu, withTuning } from '../../../test/spine-helpers.js';
import { checkOp, cpu, rand } from '../../../test/ops-helpers.js';

/** The gpu tag, and time for NVRTC (each head dim / plan / mask kind is a fresh kernel on a first run). */
const GT = { ...G, timeout: 300_000 };
const SDPA = 'scaled_dot_product_attention';
const DTYPES: DType[] = ['bf16', 'f16'];
const HEAD_DIMS = [32, 64, 80, 96, 128, 192, 256];

/** A boolean mask of `shape`, true with probability `p`; rows listed in `deadRows` (of the last-but-one dim) all false. */
function boolMask(shape: number[], seed: number, p = 0.7, deadRows: number[] = []): Tensor {
  const rng = new Rng(seed);
  const [L, S] = shape.slice(-2) as [number, number];
  const n = shape.reduce((a, b) => a * b, 1);
  const d = Array.from({ length: n }, (_, i) => (deadRows.includes(Math.floor(i / S) % L) ? 0 : rng.uniform() < p ? 1 : 0));
  return Tensor.fromArray(cpu(), d, shape, 'bool');
}

/** An additive bias N(0, 1) of `shape` with -inf at probability p; rows in `deadRows` all -inf. */
function bias(shape: number[], dtype: DType, seed: number, p = 0.2, deadRows: number[] = []): Tensor {
  const rng = new Rng(seed);
  const [L, S] = shape.slice(-2) as [number, number];
  const n = shape.reduce((a, b) => a * b, 1);
  const d = Array.from({ length: n }, (_, i) => (deadRows.includes(Math.floor(i / S) % L) || rng.uniform() < p ? -Infinity : rng.normal()));
  return Tensor.fromArray(cpu(), d, shape, dtype);
}

const permuted = (t: Tensor) => t.permute(0, 2, 1, 3);

describe('dense SDPA vs the float64 CPU backend', () => {
  for (const D of HEAD_DIMS) {
    for (const dtype of DTYPES) {
      it(`D ${D} ${dtype}: random shapes, GQA, causal, bool mask, additive bias, permuted views`, GT, () => {
        const rng = new Rng(D * 7 + (dtype === 'f16' ? 1 : 0));
        let seed = D * 1000;
        for (let round = 0; round < 3; round++) {
          const B = rng.int(1, 3);
          const Hkv = rng.int(1, 3);
          const Hq = Hkv * rng.int(1, 4);
          const L = round === 2 ? rng.int(1, 17) : rng.int(17, 150); // round 2: the one-warp plan
          const S = rng.int(1, 150);
          const gqa = Hq !== Hkv;
          const q = () => rand([B, Hq, L, D], dtype, seed++);
          const kv = () => rand([B, Hkv, S, D], dtype, seed++);
          const tag = `D ${D} ${dtype} B ${B} Hq ${Hq} Hkv ${Hkv} L ${L} S ${S}`;
          checkOp(`${tag} plain`, { op: SDPA, inputs: [q(), kv(), kv(), null], attrs: { enable_gqa: gqa } });
          checkOp(`${tag} causal`, { op: SDPA, inputs: [q(), kv(), kv(), null], attrs: { enable_gqa: gqa, is_causal: true } });
          checkOp(`${tag} bool mask [L, S], a dead row`, {
            op: SDPA, inputs: [q(), kv(), kv(), boolMask([L, S], seed++, 0.7, [L - 1])], attrs: { enable_gqa: gqa },
          });
          checkOp(`${tag} f32 bias [B, 1, L, S] with -inf, a dead row`, {
            op: SDPA, inputs: [q(), kv(), kv(), bias([B, 1, L, S], 'f32', seed++, 0.2, [0])], attrs: { enable_gqa: gqa, scale: 0.3 },
          });
          checkOp(`${tag} ${dtype} bias [Hq, L, S]`, { op: SDPA, inputs: [q(), kv(), kv(), bias([Hq, L, S], dtype, seed++, 0.05)], attrs: { enable_gqa: gqa } });
          // [B, L, H, D] storage permuted to [B, H, L, D] (a fused-projection layout), causal
          checkOp(`${tag} permuted [B, L, H, D] views, causal`, {
            op: SDPA,
            inputs: [rand([B, L, Hq, D], dtype, seed++), rand([B, S, Hkv, D], dtype, seed++), rand([B, S, Hkv, D], dtype, seed++), null],
            views: [permuted, permuted, permuted],
            attrs: { enable_gqa: gqa, is_causal: true },
          });
        }
      });
    }
  }

  it('Dv != D, rank-3 inputs, keys shared by every head (broadcast), L > S causal, a transposed bool mask', GT, () => {
    for (const dtype of DTYPES) {
      checkOp(`${dtype} D 64 Dv 128`, { op: SDPA, inputs: [rand([2, 3, 40, 64], dtype, 1), rand([2, 3, 50, 64], dtype, 2), rand([2, 3, 50, 128], dtype, 3), null] });
      checkOp(`${dtype} D 256 Dv 32, one warp`, { op: SDPA, inputs: [rand([2, 5, 256], dtype, 4), rand([2, 70, 256], dtype, 5), rand([2, 70, 32], dtype, 6), null] });
      checkOp(`${dtype} k / v [1, 1, S, D] broadcast to [B, H]`, { op: SDPA, inputs: [rand([2, 4, 33, 128], dtype, 7), rand([1, 1, 45, 128], dtype, 8), rand([1, 1, 45, 128], dtype, 9), null] });
      checkOp(`${dtype} causal L 130 > S 40`, { op: SDPA, inputs: [rand([1, 2, 130, 80], dtype, 10), rand([1, 2, 40, 80], dtype, 11), rand([1, 2, 40, 80], dtype, 12), null], attrs: { is_causal: true } });
      checkOp(`${dtype} bool mask given as [S, L] transposed`, {
        op: SDPA, inputs: [rand([2, 2, 30, 64], dtype, 13), rand([2, 2, 60, 64], dtype, 14), rand([2, 2, 60, 64], dtype, 15), boolMask([60, 30], 16)],
        views: [undefined, undefined, undefined, (t) => t.transpose(0, 1)],
      });
      checkOp(`${dtype} rows sliced out of a wider tensor (unaligned: copied)`, {
        op: SDPA, inputs: [rand([2, 2, 30, 72], dtype, 17), rand([2, 2, 20, 64], dtype, 18), rand([2, 2, 20, 64], dtype, 19), null],
        views: [(t) => t.narrow(3, 4, 64)],
      });
    }
  });

  it('S = 0: every row sees no key, the output is zeros (written, not left: the freed blocks are poisoned first)', G, () => {
    releasing((keep) => {
      const q = keep(toGpu(rand([1, 2, 5, 64], 'bf16', 1)));
      const k = keep(Tensor.empty(gpu(), [1, 2, 0, 64], 'bf16'));
      expect(opRoute(SDPA, [q, k, k, null])).toEqual({ via: 'kernel' });
      poison((2 * 5 * 64) / 2); // f32 elements of the bf16 output's bytes
      const y = keep(callOp1(SDPA, [q, k, k, null]));
      expect(Array.from(y.toFloat64Array()).every((x) => x === 0)).toBe(true);
    });
  });

  it('the flash prefill route (bf16 / f16, head dim 64 / 128, no mask) and the dense kernel both equal float64', GT, () => {
    const sdpa = gpu().generatedOps.sdpa;
    const prefillPath = gpu().runtime.properties().arch === 'sm_90a' ? 'fa3' : 'prefill';
    const shapes: { q: number[]; kv: number[]; causal: boolean }[] = [
      { q: [1, 8, 512, 128], kv: [1, 2, 512, 128], causal: true }, // the FA3 kernel on sm_90a (prefill-fa3.ts; wgmma with attention.prefillFa3 off), GQA 4
      { q: [2, 4, 130, 128], kv: [2, 4, 301, 128], causal: false },
      { q: [1, 6, 257, 64], kv: [1, 6, 257, 64], causal: true }, // FA3 on sm_90a too; the mma.sync kernel elsewhere
    ];
    try {
      for (const viaPrefill of [true, false]) {
        sdpa.viaPrefill = viaPrefill;
        for (const dtype of DTYPES) {
          shapes.forEach((c, i) => {
            const gqa = c.q[1] !== c.kv[1];
            checkOp(`${viaPrefill ? 'prefill' : 'dense'} ${dtype} ${c.q.join('x')} / ${c.kv.join('x')}${c.causal ? ' causal' : ''}`, {
              op: SDPA, inputs: [rand(c.q, dtype, 10 * i), rand(c.kv, dtype, 10 * i + 1), rand(c.kv, dtype, 10 * i + 2), null], attrs: { enable_gqa: gqa, is_causal: c.causal },
            });
            expect(sdpa.lastPath, sdpa.lastFa3Decline ?? '').toBe(viaPrefill ? prefillPath : 'dense');
          });
        }
      }
    } finally {
      sdpa.viaPrefill = true;
    }
  });
  it('sm_90a: the FA3 kernel in place on [B, H, S, D] (B 1 and 2, GQA, causal and not, head dim 64 and 128, permuted views) equals float64', GT, () => {
    expect(gpu().runtime.properties().arch, 'the FA3 kernel needs an sm_90a device').toBe('sm_90a');
    const sdpa = gpu().generatedOps.sdpa;
    const shapes: { q: number[]; kv: number[]; causal: boolean; permuted?: boolean }[] = [
      { q: [1, 8, 777, 128], kv: [1, 2, 777, 128], causal: true }, // Llama-3-8B's GQA 4, one sequence, a partial last tile
      { q: [1, 8, 600, 128], kv: [1, 8, 600, 128], causal: false },
      { q: [1, 4, 513, 64], kv: [1, 4, 513, 64], causal: true },
      { q: [2, 4, 333, 64], kv: [2, 1, 333, 64], causal: true }, // B 2: one launch over 8 query heads, 2 key heads
      { q: [2, 6, 200, 128], kv: [2, 3, 450, 128], causal: false }, // L != S
      { q: [2, 4, 129, 128], kv: [2, 2, 129, 128], causal: true, permuted: true }, // [B, L, H, D] storage: a launch per entry
      { q: [2, 4, 70, 64], kv: [2, 4, 90, 64], causal: false, permuted: true },
      { q: [1, 1, 1, 64], kv: [1, 1, 1, 64], causal: true }, // one head, one row
    ];
    const bshd = (s: number[]) => [s[0]!, s[2]!, s[1]!, s[3]!];
    for (const dtype of DTYPES) {
      shapes.forEach((c, i) => {
        const gqa = c.q[1] !== c.kv[1];
        const label = `FA3 ${dtype} ${c.q.join('x')} / ${c.kv.join('x')}${c.causal ? ' causal' : ''}${c.permuted ? ' permuted' : ''}`;
        const [qs, kvs] = c.permuted ? [bshd(c.q), bshd(c.kv)] : [c.q, c.kv];
        const n = c.q.reduce((a, b) => a * b, 1);
        poison(n / 2, n);
        checkOp(label, {
          op: SDPA, inputs: [rand(qs, dtype, 100 + 10 * i), rand(kvs, dtype, 101 + 10 * i), rand(kvs, dtype, 102 + 10 * i), null],
          views: c.permuted ? [permuted, permuted, permuted] : undefined,
          attrs: { enable_gqa: gqa, is_causal: c.causal },
        });
        expect(sdpa.lastPath, `${label}: ${sdpa.lastFa3Decline}`).toBe('fa3');
        expect(sdpa.lastFa3Decline).toBeNull();
      });
    }
    // the route before it (the varlen op per batch entry and a copy) still equals float64, and says why it ran
    withTuning('attention', { prefillFa3: false }, () => {
      checkOp('prefillFa3 off: bf16 2x4x129x128 causal', {
        op: SDPA, inputs: [rand([2, 4, 129, 128], 'bf16', 7), rand([2, 2, 129, 128], 'bf16', 8), rand([2, 2, 129, 128], 'bf16', 9), null],
        attrs: { enable_gqa: true, is_causal: true },
      });
    });
    expect(sdpa.lastPath).toBe('prefill');
    expect(sdpa.lastFa3Decline).toMatch(/attention.prefillFa3 is off/);
  });
});
