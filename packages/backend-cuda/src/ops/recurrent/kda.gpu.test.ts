/**
 * Kimi-Linear's KDA ops on CUDA (fk_kda_recurrent / fk_kda_chunk: gdn-source.ts with the decay per key channel) vs the
 * float64 CPU backend through the op registry (CUDA must take its kernel): fused_recurrent_kda and chunk_kda with batch
 * rows and states, grouped value heads, the in-kernel l2norm on and off, every dtype (f32 gates under bf16), a g whose
 * tokens and heads are strided (channels contiguous); packed sequences (one empty) over a state pool with -1 padding
 * (pool rows compared after, untouched ones bit for bit), i32 and i64 indices; decode batches 1 / 7 / 64 at
 * Kimi-Linear-48B's KDA heads (32 heads, K = V = 128, each live row its own slot: test/gla-cases.ts); a chunked prefill
 * (a 1061-token sequence in two chunks carried through the pool, 1024 tokens in one call); and a decode step captured in a CUDA graph, replayed for other
 * pool rows.
 *
 * The GPU host runs this under a time limit and the float64 CPU op is the slow half: the production-shape cases take the
 * fewest heads that keep the plan (gdn-plan.ts) of the full shape.
 */
import { F, Tensor, callOp, opRoute, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { G, cpu, expectClose, gpu, releasing, tolOf, toGpu } from '../../../test/spine-helpers.js';
import { rand } from '../../../test/ops-helpers.js';
import { GLA_DECODE_BATCHES, glaDecodeSlots } from '../../../test/gla-cases.js';
import { planGdn, type GdnShape } from './gdn-plan.js';

const GT = { ...G, timeout: 600_000 };
/** Kimi-Linear-48B-A3B's KDA heads: 32 heads (q / k / v alike), K = V = 128. */
const KL = { H: 32, HV: 32, K: 128, V: 128 } as const;
const sms = () => gpu().runtime.properties().multiprocessors;

/** KDA's gates: g = -softplus(x) / 2 a key channel (log decay), beta = sigmoid(x), rounded to dtype. */
function gate(shape: number[], dtype: DType, seed: number, kind: 'g' | 'beta'): Tensor {
  const x = rand(shape, 'f64', seed);
  const d = x.toFloat64Array().map((z) => (kind === 'g' ? -Math.log1p(Math.exp(z)) / 2 : 1 / (1 + Math.exp(-z))));
  x.dispose();
  return Tensor.fromArray(cpu(), d, shape, dtype);
}

interface KdaCase {
  readonly op?: 'fused_recurrent_kda' | 'chunk_kda';
  readonly dtype: DType;
  readonly gDType?: DType;
  readonly B: number;
  readonly T: number;
  readonly H: number;
  readonly HV: number;
  readonly K: number;
  readonly V: number;
  readonly cu?: number[];
  readonly idx?: number[];
  readonly slots?: number;
  readonly idxDType?: DType;
  readonly init?: boolean;
  readonly final?: boolean;
  readonly l2norm?: boolean;
  readonly scale?: number;
  /** g stored [B, HV, T, K] and passed as its [B, T, HV, K] view. */
  readonly permuteG?: boolean;
  /** The pool to run over (the chunked-prefill case carries one across calls); else a fresh random one. */
  readonly pool?: { cpu: Tensor; gpu: Tensor };
  readonly seed?: number;
}

function checkKda(label: string, c: KdaCase): void {
  releasing((keep) => {
    const op = c.op ?? 'fused_recurrent_kda';
    const N = c.cu ? c.cu.length - 1 : c.B;
    const { B, T, H, HV, K, V, dtype } = c;
    const seed = c.seed ?? 0;
    const pooled = c.idx !== undefined;
    const live = (c.idx ?? []).filter((s) => s >= 0);
    expect(new Set(live).size, `${label}: every live row its own pool slot`).toBe(live.length);
    const l2 = c.l2norm ?? true;
    const qk = (s: number) => {
      const x = keep(rand([B, T, H, K], dtype, seed + s));
      return l2 ? x : keep(F.l2Norm(x));
    };
    const q = qk(1);
    const k = qk(2);
    const v = keep(rand([B, T, HV, V], dtype, seed + 3));
    const g = c.permuteG ? keep(keep(gate([B, HV, T, K], c.gDType ?? dtype, seed + 4, 'g')).permute([0, 2, 1, 3])) : keep(gate([B, T, HV, K], c.gDType ?? dtype, seed + 4, 'g'));
    const beta = keep(gate([B, T, HV], dtype, seed + 5, 'beta'));
    const s0 = c.pool?.cpu ?? (pooled || c.init ? keep(rand(pooled ? [c.slots!, HV, K, V] : [N, HV, K, V], 'f32', 6, { scale: 0.5 })) : null);
    const cu = c.cu ? keep(Tensor.fromArray(cpu(), c.cu, [c.cu.length], c.idxDType ?? 'i32')) : null;
    const idx = c.idx ? keep(Tensor.fromArray(cpu(), c.idx, [c.idx.length], c.idxDType ?? 'i32')) : null;
    const attrs = { scale: c.scale ?? null, output_final_state: !pooled && (c.final ?? true), use_qk_l2norm_in_kernel: l2 };
    const gIn = [q, k, v, g, beta].map((t) => keep(toGpu(t)));
    const gS0 = c.pool?.gpu ?? (s0 ? keep(toGpu(s0)) : null);
    const gAll = [...gIn, gS0, cu && keep(toGpu(cu)), idx && keep(toGpu(idx))];
    expect(opRoute(op, gAll, attrs), `${label}: route`).toEqual({ via: 'kernel' });
    const poolBefore = gS0 ? gS0.toFloat64Array() : null; // the device's rows (a carried pool's differ from the CPU's by rounding)
    const want = keep(callOp(op, [q, k, v, g, beta, s0, cu, idx], attrs));
    const got = keep(callOp(op, gAll, attrs));
    expect(got.length).toBe(want.length);
    expectClose(got[0]!, want[0]!, tolOf(dtype), `${label}: o`);
    if (attrs.output_final_state) expectClose(got[1]!, want[1]!, tolOf('f32'), `${label}: final state`);
    if (pooled) {
      const after = gS0!.toFloat64Array();
      const wantPool = s0!.toFloat64Array();
      const per = HV * K * V;
      for (let sl = 0; sl < s0!.shape[0]!; sl++) {
        const a = after.subarray(sl * per, (sl + 1) * per);
        if (!c.idx!.includes(sl)) {
          expect(a.every((x, i) => x === poolBefore![sl * per + i]), `${label}: pool slot ${sl} untouched`).toBe(true);
          continue;
        }
        const row = (d: Float64Array) => Tensor.fromArray(cpu(), d, [per], 'f32');
        expectClose(keep(row(a)), keep(row(wantPool.subarray(sl * per, (sl + 1) * per))), tolOf('f32'), `${label}: pool slot ${sl}`);
      }
    }
  });
}

function samePlan(full: GdnShape, cut: GdnShape, kind: 'recurrent' | 'chunk'): void {
  const tile = (s: GdnShape) => ({ ...planGdn(s, 4, sms(), kind, 'channel'), grid: null });
  expect(tile(cut), `${JSON.stringify(cut)} plans as ${JSON.stringify(full)}`).toEqual(tile(full));
}

describe('KDA kernels (fused_recurrent_kda, chunk_kda) vs the float64 CPU backend', () => {
  it('batch rows across chunk ends, grouped value heads, states in and out, l2norm on and off, a strided g, every dtype', GT, () => {
    for (const op of ['fused_recurrent_kda', 'chunk_kda'] as const) {
      for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
        checkKda(`${op} ${dtype} B 2 T 37 H 2 HV 4 K 16 V 12`, { op, dtype, B: 2, T: 37, H: 2, HV: 4, K: 16, V: 12, init: true });
        checkKda(`${op} ${dtype} B 3 T 20 K 40 V 10 scale 0.3, prenormed q / k, strided g, no state`, { op, dtype, B: 3, T: 20, H: 1, HV: 3, K: 40, V: 10, scale: 0.3, l2norm: false, final: false, permuteG: true });
      }
      checkKda(`${op} bf16 with f32 gates`, { op, dtype: 'bf16', gDType: 'f32', B: 2, T: 19, H: 2, HV: 2, K: 32, V: 32, init: true });
    }
  });

  it('packed sequences (one empty) over a pool with -1 padding, i32 and i64 indices, both ops', GT, () => {
    for (const idxDType of ['i32', 'i64'] as DType[]) {
      for (const op of ['fused_recurrent_kda', 'chunk_kda'] as const) {
        checkKda(`${op} varlen ${idxDType}`, { op, dtype: 'bf16', B: 1, T: 90, H: 2, HV: 4, K: 32, V: 48, cu: [0, 17, 17, 70, 90], idx: [5, 0, -1, 2], slots: 6, idxDType });
      }
    }
  });

  it('Kimi-Linear-48B decode at batch 1, 7 and 64 over a pool (a -1 row in each batch past 1, distinct slots)', GT, () => {
    for (const D of GLA_DECODE_BATCHES) {
      // bs 64 on 4 heads: the full shape's tile over an 8x smaller pool for the CPU to fill and hold
      const heads = D === 64 ? { H: 4, HV: 4, K: KL.K, V: KL.V } : KL;
      samePlan({ N: D, HV: KL.HV, K: KL.K, V: KL.V }, { N: D, HV: heads.HV, K: KL.K, V: KL.V }, 'recurrent');
      checkKda(`decode bs ${D}`, { dtype: 'bf16', gDType: 'f32', B: D, T: 1, ...heads, ...glaDecodeSlots(D) });
    }
  });

  it('a chunked prefill at Kimi-Linear-48B heads: a 1061-token sequence in two chunks carried through the pool (beside a short one); 1024 tokens in one call', GT, () => {
    releasing((keep) => {
      const [H, K, V] = [2, KL.K, KL.V];
      samePlan({ N: 1, HV: KL.HV, K, V }, { N: 1, HV: H, K, V }, 'chunk');
      const base = keep(rand([3, H, K, V], 'f32', 6, { scale: 0.5 }));
      const pool = { cpu: base, gpu: keep(toGpu(base)) };
      // two chunks of one sequence (slot 1) beside a short one (slot 0); the chunked op on both backends over the same pool
      checkKda('prefill chunk 1', { op: 'chunk_kda', dtype: 'bf16', gDType: 'f32', B: 1, T: 600, H, HV: H, K, V, cu: [0, 37, 600], idx: [0, 1], pool, seed: 10 });
      checkKda('prefill chunk 2', { op: 'chunk_kda', dtype: 'bf16', gDType: 'f32', B: 1, T: 461, H, HV: H, K, V, cu: [0, 461], idx: [1], pool, seed: 20 });
      checkKda('prefill 1024 tokens, batch rows with states', { op: 'chunk_kda', dtype: 'bf16', gDType: 'f32', B: 1, T: 1024, H, HV: H, K, V, init: true, seed: 30 });
    });
  });

  it('a KDA decode step captured in a CUDA graph updates the pool rows the index tensor names at each replay', GT, () => {
    releasing((keep) => {
      const D = 4;
      const slots = 8;
      const [H, K, V] = [2, KL.K, KL.V];
      const cpuIn = [rand([D, 1, H, K], 'bf16', 1), rand([D, 1, H, K], 'bf16', 2), rand([D, 1, H, V], 'bf16', 3), gate([D, 1, H, K], 'f32', 4, 'g'), gate([D, 1, H], 'bf16', 5, 'beta')].map(keep);
      const pool = keep(rand([slots, H, K, V], 'f32', 6, { scale: 0.5 }));
      const gIn = cpuIn.map((t) => keep(toGpu(t)));
      const gPool = keep(toGpu(pool));
      const gIdx = keep(Tensor.zeros(gpu(), [D], 'i32'));
      const setIdx = (vals: number[]) => gpu().write(gIdx.storage, 0, new Uint8Array(Int32Array.from(vals).buffer));
      const attrs = { use_qk_l2norm_in_kernel: true };
      const step = () => callOp('fused_recurrent_kda', [...gIn, gPool, null, gIdx], attrs)[0]!;
      const cpuStep = (vals: number[]) => keep(callOp('fused_recurrent_kda', [...cpuIn, pool, null, keep(Tensor.fromArray(cpu(), vals, [D], 'i32'))], attrs)[0]!);
      setIdx([0, 1, 2, 3]);
      keep(step()); // compiles the kernel outside the capture; pool rows 0-3 advance once
      cpuStep([0, 1, 2, 3]);
      let out: Tensor | null = null;
      const graph = gpu().runtime.capture(() => {
        out = step();
      }, { poolBytes: 16 << 20 });
      try {
        for (const vals of [[7, -1, 5, 0], [3, 6, -1, 4]]) {
          setIdx(vals);
          graph.replay();
          expectClose(out!, cpuStep(vals), tolOf('bf16'), `graph replay ${vals}: o`);
          expectClose(gPool, pool, tolOf('f32'), `graph replay ${vals}: pool`);
        }
      } finally {
        (out as Tensor | null)?.dispose();
        graph.destroy();
      }
    });
  });
});
