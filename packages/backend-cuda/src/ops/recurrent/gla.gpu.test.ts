/**
 * fused_recurrent_gla and chunk_gla on CUDA (gla-source.ts) vs the float64 CPU backend through the op registry (CUDA
 * must take its kernel): tiny heads and GLA-2.7B's (5 heads, K 256, V 512); batch rows with an initial and a final
 * state; packed sequences (cu_seqlens) over a state pool with -1 padding rows (the pool rows compared after, the
 * untouched ones bit for bit); decode batches 1 / 7 / 64 (test/gla-cases.ts: each live row its own pool slot, as vLLM
 * gives them: two rows on one slot race, issue 32); chunk_gla at chunk sizes 16 and 64 (the same function); bf16, f16
 * and f32 inputs; i32 and i64 indices; and a decode step captured in a CUDA graph, replayed for other pool rows. Gates
 * are GLA's, logsigmoid(x) / 16.
 *
 * chunk_gla calls in bf16 / f16 with K and V multiples of 16 take the tensor-core kernels (gla-tc.ts; the route is
 * asserted where a case says) at the same tolerances (their operands are hi + lo pairs); the GLA-2.7B chunk cases run
 * on both chunked kernels (recurrent.chunkGlaTensorCore off for the CUDA-core one), and GLA-2.7B's bench prefill shape
 * runs in full (5 heads, 4096 tokens and a 37-token tail, initial and final state) on the tensor-core plan of the bench.
 *
 * The GPU host runs this under a time limit and the float64 CPU op is the slow half: the production-shape cases take
 * the fewest heads and tokens that keep the plan (gla-plan.ts) of the full shape, and chunk_gla's are held to the CPU's
 * fused_recurrent_gla (the same function, a quarter of the CPU chunked form's time).
 */
import { Tensor, callOp, opRoute, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpu, expectClose, gpu, releasing, tolOf, toGpu } from '../../../test/spine-helpers.js';
import { rand } from '../../../test/ops-helpers.js';
import { GLA27, GLA_DECODE_BATCHES, glaDecodeSlots, type RecurrentCaseShape } from '../../../test/gla-cases.js';
import { GRAPH_DECODE_ROWS, GT, checkDecodeGraph, expectPoolRows, sms } from '../../../test/recurrent-gpu.js';
import { cudaTuning, withTuning } from '../../tuning/load.js';
import { planGla, type GlaShape } from './gla-plan.js';
import { glaTcDecline, planGlaTc } from './gla-tc-plan.js';

type Op = 'fused_recurrent_gla' | 'chunk_gla';

interface Case extends RecurrentCaseShape {
  readonly op: Op;
  readonly dtype: DType;
  readonly idxDType?: DType;
  readonly chunk?: number;
  /** The CPU op the result is held to (default: the same op). */
  readonly ref?: Op;
  /** Asserted: whether the call takes the tensor-core chunk_gla (on an sm_80+ device with the knob on). */
  readonly tensorCores?: boolean;
}

/** GLA's gates: logsigmoid(N(0, 1)) / 16, rounded to dtype. */
function gates(shape: number[], dtype: DType, seed: number): Tensor {
  const x = rand(shape, 'f64', seed);
  const d = x.toFloat64Array().map((z) => -Math.log1p(Math.exp(-z)) / 16);
  x.dispose();
  return Tensor.fromArray(cpu(), d, shape, dtype);
}

/** Whether a chunk_gla call of this case takes the tensor-core kernels on this device. */
function tensorCores(c: Case, N: number): boolean {
  const major = (gpu().runtime.properties() as { major?: number }).major;
  return c.op === 'chunk_gla' && glaTcDecline({ dtype: c.dtype, N, T: c.T, H: c.H, K: c.K, V: c.V, smMajor: major, enabled: cudaTuning().recurrent.chunkGlaTensorCore }) === null;
}

/** The cut-down shape launches the full one's kernel: the same tile, threads and shared memory (H only moves grid.y). */
function samePlan(kind: 'recurrent' | 'chunk', full: GlaShape, cut: GlaShape): void {
  const tile = (s: GlaShape) => ({ ...planGla(kind, s, 4, sms()), grid: null });
  expect(tile(cut), `${kind} ${JSON.stringify(cut)} plans as ${JSON.stringify(full)}`).toEqual(tile(full));
}

function check(label: string, c: Case): void {
  releasing((keep) => {
    const N = c.cu ? c.cu.length - 1 : c.B;
    const { B, T, H, K, V, dtype } = c;
    const pooled = c.idx !== undefined;
    const live = (c.idx ?? []).filter((s) => s >= 0);
    expect(new Set(live).size, `${label}: every live row its own pool slot (two on one race on the GPU)`).toBe(live.length);
    const q = keep(rand([B, T, H, K], dtype, 1));
    const k = keep(rand([B, T, H, K], dtype, 2));
    const v = keep(rand([B, T, H, V], dtype, 3));
    const g = keep(gates([B, T, H, K], dtype, 4));
    const s0 = pooled || c.init ? keep(rand(pooled ? [c.slots!, H, K, V] : [N, H, K, V], 'f32', 5)) : null;
    const cu = c.cu ? keep(Tensor.fromArray(cpu(), c.cu, [c.cu.length], 'i32')) : null;
    const idx = c.idx ? keep(Tensor.fromArray(cpu(), c.idx, [c.idx.length], c.idxDType ?? 'i32')) : null;
    const attrs = { scale: c.scale ?? null, output_final_state: !pooled && (c.final ?? true), ...(c.op === 'chunk_gla' ? { chunk_size: c.chunk ?? 64 } : {}) };
    const gIn = [q, k, v, g, s0, cu, idx].map((t) => (t ? keep(toGpu(t)) : null));
    expect(opRoute(c.op, gIn, attrs), `${label}: route`).toEqual({ via: 'kernel' });
    const poolBefore = s0 ? s0.toFloat64Array() : null;
    const ref = c.ref ?? c.op;
    const want = keep(callOp(ref, [q, k, v, g, s0, cu, idx], ref === 'chunk_gla' ? attrs : { scale: attrs.scale, output_final_state: attrs.output_final_state }));
    const got = keep(callOp(c.op, gIn, attrs));
    expect(got.length).toBe(want.length);
    if (c.tensorCores !== undefined) expect(tensorCores(c, N), `${label}: takes the tensor-core kernels`).toBe(c.tensorCores);
    expectClose(got[0]!, want[0]!, tolOf(dtype), `${label}: o`);
    if (attrs.output_final_state) expectClose(got[1]!, want[1]!, tolOf('f32'), `${label}: final state`);
    if (pooled) expectPoolRows(label, keep, { after: gIn[4]!.toFloat64Array(), want: s0!.toFloat64Array(), before: poolBefore! }, c.idx!, c.slots!, H * K * V);
  });
}

describe('GLA kernels vs the float64 CPU backend', () => {
  for (const op of ['fused_recurrent_gla', 'chunk_gla'] as const) {
    it(`${op}: tiny heads, batch rows, initial and final state, every dtype`, GT, () => {
      for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
        check(`${op} ${dtype} B 2 T 37 K 8 V 12`, { op, dtype, B: 2, T: 37, H: 2, K: 8, V: 12, init: true, chunk: 16 });
        check(`${op} ${dtype} B 3 T 5 K 40 V 10 scale 0.3, no state`, { op, dtype, B: 3, T: 5, H: 3, K: 40, V: 10, scale: 0.3, final: false });
      }
      if (op === 'chunk_gla') for (const chunk of [16, 64]) check(`chunk_gla chunk_size ${chunk} T 150`, { op, dtype: 'bf16', B: 1, T: 150, H: 2, K: 64, V: 64, init: true, chunk });
    });
    it(`${op}: packed sequences (one empty) over a pool with -1 padding, i32 and i64 indices`, GT, () => {
      for (const idxDType of ['i32', 'i64'] as DType[]) {
        check(`${op} varlen ${idxDType}`, { op, dtype: 'bf16', B: 1, T: 90, H: 2, K: 32, V: 48, cu: [0, 17, 17, 70, 90], idx: [5, 0, -1, 2], slots: 6, idxDType });
      }
    });
  }

  it('fused_recurrent_gla: GLA-2.7B decode at batch 1, 7 and 64 over a pool (a -1 row in each batch past 1, distinct slots)', GT, () => {
    for (const D of GLA_DECODE_BATCHES) {
      // bs 64 on one head: the plan of 5 (BV 32 from bs 7 up) over a 5x smaller pool to fill and hold on the CPU
      const heads = D === 64 ? { ...GLA27, H: 1 } : GLA27;
      samePlan('recurrent', { N: D, ...GLA27 }, { N: D, ...heads });
      check(`decode bs ${D}`, { op: 'fused_recurrent_gla', dtype: 'bf16', B: D, T: 1, ...heads, ...glaDecodeSlots(D) });
    }
  });

  it('GLA-2.7B prefill: chunk_gla packed 3 sequences over a pool, one 1024-token sequence with states (both chunked kernels); fused_recurrent at T 64', GT, () => {
    // sequence ends inside chunks and across them: the tensor-core kernels (the default), then the CUDA-core
    // fk_gla_chunk with the knob off (5 heads keep its BV 32 plan, 68 KiB of shared memory)
    const varlen: Case = { op: 'chunk_gla', dtype: 'bf16', B: 1, T: 150, ...GLA27, cu: [0, 37, 100, 150], idx: [2, -1, 0], slots: 3, ref: 'fused_recurrent_gla' };
    check('chunk_gla gla-2.7b varlen', { ...varlen, tensorCores: cudaTuning().recurrent.chunkGlaTensorCore });
    withTuning('recurrent', { chunkGlaTensorCore: false }, () => check('chunk_gla gla-2.7b varlen, CUDA cores', { ...varlen, tensorCores: false }));
    expect(planGla('chunk', { N: 3, ...GLA27 }, 4, sms()).bv).toBe(32);
    // 64 chunks of one sequence: one head has the CUDA-core plan of 5 (BV 16)
    samePlan('chunk', { N: 1, ...GLA27 }, { N: 1, ...GLA27, H: 1 });
    const long: Case = { op: 'chunk_gla', dtype: 'bf16', B: 1, T: 1024, ...GLA27, H: 1, init: true, ref: 'fused_recurrent_gla' };
    check('chunk_gla gla-2.7b T 1024 states', long);
    withTuning('recurrent', { chunkGlaTensorCore: false }, () => check('chunk_gla gla-2.7b T 1024 states, CUDA cores', { ...long, tensorCores: false }));
    check('fused_recurrent_gla gla-2.7b T 64 x 2', { op: 'fused_recurrent_gla', dtype: 'bf16', B: 2, T: 64, ...GLA27, init: true });
  });

  it('GLA-2.7B bench prefill on tensor cores: 5 heads, 4096 tokens and a 37-token tail, initial and final state (BV 32, 80 CTAs)', GT, () => {
    const T = 4096 + 37;
    expect(planGlaTc({ N: 1, T, ...GLA27, varlen: false }, sms()).mainGrid).toEqual(planGlaTc({ N: 1, T: 4096, ...GLA27, varlen: false }, sms()).mainGrid);
    const tc = cudaTuning().recurrent.chunkGlaTensorCore;
    check(`chunk_gla gla-2.7b T ${T} states`, { op: 'chunk_gla', dtype: 'bf16', B: 1, T, ...GLA27, init: true, ref: 'fused_recurrent_gla', tensorCores: tc });
    // f16 on the same kernels, one head, a sequence that ends inside its second chunk
    check('chunk_gla gla-2.7b f16 T 100', { op: 'chunk_gla', dtype: 'f16', B: 1, T: 100, ...GLA27, H: 1, init: true, ref: 'fused_recurrent_gla', tensorCores: tc });
  });

  it('a decode step captured in a CUDA graph updates the pool rows the index tensor names at each replay', GT, () => {
    releasing((keep) => {
      const D = GRAPH_DECODE_ROWS;
      const slots = 8;
      const { H, K, V } = { H: 2, K: 64, V: 128 };
      const cpuIn = [rand([D, 1, H, K], 'bf16', 1), rand([D, 1, H, K], 'bf16', 2), rand([D, 1, H, V], 'bf16', 3), gates([D, 1, H, K], 'bf16', 4)].map(keep);
      const pool = keep(rand([slots, H, K, V], 'f32', 5));
      const gIn = cpuIn.map((t) => keep(toGpu(t)));
      const gPool = keep(toGpu(pool));
      checkDecodeGraph(keep, (i) => [callOp('fused_recurrent_gla', [...gIn, gPool, null, i], {})[0]!], (i) => [callOp('fused_recurrent_gla', [...cpuIn, pool, null, i], {})[0]!], ['o'], [[gPool, pool, 'pool']]);
    });
  });
});
