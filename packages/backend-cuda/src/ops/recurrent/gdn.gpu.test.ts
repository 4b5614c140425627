/**
 * Qwen3-Next's gated-DeltaNet ops on CUDA (gdn-source.ts) vs the float64 CPU backend through the op registry (CUDA must
 * take its kernel): fused_recurrent_gated_delta_rule and chunk_gated_delta_rule (the chunked kernel: chunks of 16,
 * sequence ends inside and across them, a 1024-token prefill; the CPU's chunk op is its recurrent decomposition) with
 * batch rows and states, grouped value heads, the in-kernel l2norm on and off, packed sequences (one empty) over a state
 * pool with -1 padding (pool rows compared after, untouched ones bit for bit), decode batches 1 / 7 / 64 at
 * Qwen3-Next-80B's head dims (each live row its own slot: test/gla-cases.ts), i32 and i64 indices, bf16 / f16 / f32
 * inputs (f32 gates under bf16); causal_conv1d packed prefills over a conv pool (a transposed x as the engine passes it,
 * has_initial_state) and with batch-row states, causal_conv1d_update decode rows over the pool (state_len > W - 1); and
 * a decode step of both (conv update, then the delta rule) captured in a CUDA graph, replayed for other pool rows.
 * chunk_gated_delta_rule's tensor-core kernels (gdn_chunk_tc.cu, the default for bf16 / f16 at head dims of multiples
 * of 16): Qwen3-Next's full bench shape (16 / 32 heads, K = V = 128, 4096 + 37 tokens) against the float64 op and
 * against the CUDA-core fk_gdn_chunk at T 4096, f16 over a pool; the CUDA-core kernel keeps its cases with
 * recurrent.chunkDeltaTensorCore off.
 *
 * The GPU host runs this under a time limit and the float64 CPU op is the slow half: the production-shape cases take the
 * fewest heads that keep the plan (gdn-plan.ts) of the full shape.
 */
import { Tensor, callOp, opRoute, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpu, expectClose, gpu, releasing, tolOf, toGpu } from '../../../test/spine-helpers.js';
import { rand } from '../../../test/ops-helpers.js';
import { GLA_DECODE_BATCHES, glaDecodeSlots, type ConvCaseShape } from '../../../test/gla-cases.js';
import { GRAPH_DECODE_ROWS, GT, checkDecodeGraph, checkDeltaRule, deltaGate, sms, type DeltaRuleCase } from '../../../test/recurrent-gpu.js';
import { cudaTuning, withTuning } from '../../tuning/load.js';
import { planGdn, type GdnShape } from './gdn-plan.js';
import { gdnTcDecline, planGdnTc } from './gdn-tc-plan.js';

/** Qwen3-Next-80B's gated DeltaNet heads: 32 value heads over 16 q / k heads, K = V = 128. */
const QN = { H: 16, HV: 32, K: 128, V: 128 } as const;

type DeltaCase = Omit<DeltaRuleCase, 'op'> & {
  readonly op?: 'fused_recurrent_gated_delta_rule' | 'chunk_gated_delta_rule';
  /** chunk_gated_delta_rule: whether the call must take the tensor-core kernels (gdn_chunk_tc.cu) or the CUDA-core fk_gdn_chunk. */
  readonly tensorCores?: boolean;
};
const checkDelta = (label: string, c: DeltaCase) => {
  if (c.tensorCores !== undefined) expect(takesTensorCores(c), `${label}: takes the tensor-core kernels`).toBe(c.tensorCores);
  checkDeltaRule(label, { ...c, op: c.op ?? 'fused_recurrent_gated_delta_rule' });
};

/** Whether a call of this case takes the tensor-core chunk_gated_delta_rule on this device (the route's own test). */
function takesTensorCores(c: DeltaCase): boolean {
  const props = gpu().runtime.properties() as { major?: number; sharedPerBlockOptin?: number };
  const N = c.cu ? c.cu.length - 1 : c.B;
  return gdnTcDecline({
    op: c.op ?? 'fused_recurrent_gated_delta_rule', dtypes: [c.dtype, c.gDType ?? c.dtype, c.dtype], N, T: c.T, H: c.H, HV: c.HV, K: c.K, V: c.V,
    smMajor: props.major, enabled: cudaTuning().recurrent.chunkDeltaTensorCore, sharedPerBlockOptin: props.sharedPerBlockOptin,
  }) === null;
}

interface ConvCase extends ConvCaseShape {
  readonly dtype: DType;
  readonly idxDType?: DType;
}

function checkConv(label: string, c: ConvCase): void {
  releasing((keep) => {
    const { B, D, L, W, dtype } = c;
    const pooled = c.idx !== undefined;
    const S = c.S ?? W - 1;
    const x = c.transposed ? keep(keep(rand([B, L, D], dtype, 1)).transpose(1, 2)) : keep(rand([B, D, L], dtype, 1));
    const w = keep(rand([D, W], dtype, 2, { scale: 0.5 }));
    const bias = c.bias ? keep(rand([D], dtype, 3)) : null;
    const st = pooled || c.init || c.op === 'causal_conv1d_update' ? keep(rand(pooled ? [c.slots!, D, S] : [B, D, S], pooled ? 'f32' : dtype, 4)) : null;
    const cu = c.cu ? keep(Tensor.fromArray(cpu(), c.cu, [c.cu.length], c.idxDType ?? 'i32')) : null;
    const idx = c.idx ? keep(Tensor.fromArray(cpu(), c.idx, [c.idx.length], c.idxDType ?? 'i32')) : null;
    const his = c.his ? keep(Tensor.fromArray(cpu(), c.his, [c.his.length], 'bool')) : null;
    const ins = c.op === 'causal_conv1d' ? [x, w, bias, st, cu, idx, his] : [x, st, w, bias, idx];
    const stIdx = c.op === 'causal_conv1d' ? 3 : 1;
    const attrs = c.op === 'causal_conv1d' ? { activation: 'silu', return_final_states: !pooled } : { activation: 'silu' };
    const gIn = ins.map((t) => (t ? keep(toGpu(t)) : null));
    expect(opRoute(c.op, gIn, attrs), `${label}: route`).toEqual({ via: 'kernel' });
    const poolBefore = st ? st.toFloat64Array() : null;
    const want = keep(callOp(c.op, ins, attrs));
    const got = keep(callOp(c.op, gIn, attrs));
    expect(got.length).toBe(want.length);
    expectClose(got[0]!, want[0]!, tolOf(dtype), `${label}: out`);
    if (got[1]) expectClose(got[1], want[1]!, tolOf(want[1]!.dtype), `${label}: state`);
    if (pooled) {
      const after = gIn[stIdx]!.toFloat64Array();
      const wantPool = st!.toFloat64Array();
      const per = D * S;
      for (let sl = 0; sl < c.slots!; sl++) {
        const a = after.subarray(sl * per, (sl + 1) * per);
        const ref = c.idx!.includes(sl) ? wantPool : poolBefore!;
        // the pool is f32 and the new rows are x's values or old rows: exact
        expect(a.every((v, i) => v === ref[sl * per + i]), `${label}: pool row ${sl}`).toBe(true);
      }
    }
  });
}

function samePlan(full: GdnShape, cut: GdnShape): void {
  const tile = (s: GdnShape) => ({ ...planGdn(s, 4, sms()), grid: null });
  expect(tile(cut), `${JSON.stringify(cut)} plans as ${JSON.stringify(full)}`).toEqual(tile(full));
}

describe('gated DeltaNet kernels vs the float64 CPU backend', () => {
  it('fused_recurrent_gated_delta_rule: batch rows, grouped value heads, states in and out, l2norm on and off, every dtype', GT, () => {
    for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
      checkDelta(`${dtype} B 2 T 37 H 2 HV 4 K 16 V 12`, { dtype, B: 2, T: 37, H: 2, HV: 4, K: 16, V: 12, init: true });
      checkDelta(`${dtype} B 3 T 5 K 40 V 10 scale 0.3, prenormed q / k, no state`, { dtype, B: 3, T: 5, H: 1, HV: 3, K: 40, V: 10, scale: 0.3, l2norm: false, final: false });
    }
    checkDelta('bf16 with f32 gates', { dtype: 'bf16', gDType: 'f32', B: 2, T: 9, H: 2, HV: 2, K: 32, V: 32, init: true });
  });

  it('packed sequences (one empty) over a pool with -1 padding, i32 and i64 indices; chunk_gated_delta_rule the same', GT, () => {
    for (const idxDType of ['i32', 'i64'] as DType[]) {
      for (const op of ['fused_recurrent_gated_delta_rule', 'chunk_gated_delta_rule'] as const) {
        checkDelta(`${op} varlen ${idxDType}`, { op, dtype: 'bf16', B: 1, T: 90, H: 2, HV: 4, K: 32, V: 48, cu: [0, 17, 17, 70, 90], idx: [5, 0, -1, 2], slots: 6, idxDType });
      }
    }
  });

  it('chunk_gated_delta_rule: batch rows across chunk ends, every dtype; Qwen3-Next-80B heads, packed prefills over a pool and 1024 tokens', GT, () => {
    const op = 'chunk_gated_delta_rule' as const;
    for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) checkDelta(`chunk ${dtype} B 2 T 37`, { op, dtype, B: 2, T: 37, H: 2, HV: 4, K: 16, V: 12, init: true });
    checkDelta('chunk prenormed q / k, scale 0.3', { op, dtype: 'bf16', B: 1, T: 40, H: 1, HV: 2, K: 40, V: 10, scale: 0.3, l2norm: false, init: true });
    // bf16 at Qwen3-Next's head dims takes the tensor-core kernels (the default), then the CUDA-core fk_gdn_chunk with
    // the knob off
    const tc = cudaTuning().recurrent.chunkDeltaTensorCore;
    const varlen: DeltaCase = { op, dtype: 'bf16', B: 1, T: 150, H: 1, HV: 2, K: QN.K, V: QN.V, cu: [0, 37, 100, 150], idx: [2, -1, 0], slots: 3 };
    checkDelta('chunk qwen3-next varlen pool', { ...varlen, tensorCores: tc });
    withTuning('recurrent', { chunkDeltaTensorCore: false }, () => checkDelta('chunk qwen3-next varlen pool, CUDA cores', { ...varlen, tensorCores: false }));
    const long: DeltaCase = { op, dtype: 'bf16', B: 1, T: 1024, H: 1, HV: 2, K: QN.K, V: QN.V, init: true };
    checkDelta('chunk qwen3-next T 1024 states', { ...long, tensorCores: tc });
    withTuning('recurrent', { chunkDeltaTensorCore: false }, () => checkDelta('chunk qwen3-next T 1024 states, CUDA cores', { ...long, tensorCores: false }));
  });

  it("chunk_gated_delta_rule on tensor cores at Qwen3-Next's bench shape: 16 / 32 heads, K = V = 128, 4096 tokens and a 37-token tail, f32 g, states in and out (BV 32, 128 CTAs)", GT, () => {
    const T = 4096 + 37;
    const shape = { N: 1, T, ...QN, varlen: false };
    expect(planGdnTc(shape, sms()).bv).toBe(sms() >= 128 ? 32 : 64); // H100 / H200 (132 SMs): BV 32, one wave of 4 x 32 CTAs
    const tc = cudaTuning().recurrent.chunkDeltaTensorCore;
    const op = 'chunk_gated_delta_rule' as const;
    checkDelta(`chunk qwen3-next T ${T} states`, { op, dtype: 'bf16', gDType: 'f32', B: 1, T, ...QN, init: true, tensorCores: tc });
    // f16 on the same kernels, q / k normalised outside, packed sequences of odd lengths over a pool with a -1 row
    checkDelta('chunk qwen3-next f16 varlen pool, no l2norm', { op, dtype: 'f16', B: 1, T: 301, ...QN, H: 2, HV: 4, cu: [0, 17, 190, 301], idx: [1, -1, 3], slots: 4, l2norm: false, tensorCores: tc });
  });

  it('chunk_gated_delta_rule at T 4096, Qwen3-Next heads: the tensor-core kernels agree with the CUDA-core fk_gdn_chunk (o, final state)', GT, () => {
    releasing((keep) => {
      const { H, HV, K, V } = QN;
      const T = 4096;
      const ins = [rand([1, T, H, K], 'bf16', 1), rand([1, T, H, K], 'bf16', 2), rand([1, T, HV, V], 'bf16', 3), deltaGate([1, T, HV], 'f32', 4, 'g'), deltaGate([1, T, HV], 'bf16', 5, 'beta'), rand([1, HV, K, V], 'f32', 6, { scale: 0.5 })].map(
        (t) => keep(toGpu(keep(t))),
      );
      const attrs = { output_final_state: true, use_qk_l2norm_in_kernel: true };
      const all = [...ins, null, null];
      const tc = keep(callOp('chunk_gated_delta_rule', all, attrs));
      const cc = keep(withTuning('recurrent', { chunkDeltaTensorCore: false }, () => callOp('chunk_gated_delta_rule', all, attrs)));
      expectClose(tc[0]!, cc[0]!, tolOf('bf16'), 'o: tensor cores vs CUDA cores');
      expectClose(tc[1]!, cc[1]!, tolOf('f32'), 'final state: tensor cores vs CUDA cores');
    });
  });

  it('Qwen3-Next-80B decode at batch 1, 7 and 64 over a pool (a -1 row in each batch past 1, distinct slots)', GT, () => {
    for (const D of GLA_DECODE_BATCHES) {
      // bs 64 on 4 value heads: the full shape's tile (BV 64) over an 8x smaller pool for the CPU to fill and hold
      const heads = D === 64 ? { H: 2, HV: 4, K: QN.K, V: QN.V } : QN;
      samePlan({ N: D, HV: QN.HV, K: QN.K, V: QN.V }, { N: D, HV: heads.HV, K: QN.K, V: QN.V });
      checkDelta(`decode bs ${D}`, { dtype: 'bf16', B: D, T: 1, ...heads, ...glaDecodeSlots(D) });
    }
  });

  it('causal_conv1d: packed prefills over a conv pool (transposed x, has_initial_state, padding), batch rows with states, every dtype', GT, () => {
    for (const dtype of ['bf16', 'f16', 'f32'] as DType[]) {
      checkConv(`${dtype} varlen pool`, { op: 'causal_conv1d', dtype, B: 1, D: 300, L: 70, W: 4, cu: [0, 2, 2, 50, 70], idx: [3, 0, -1, 5], slots: 6, his: [1, 1, 1, 0], transposed: true });
      checkConv(`${dtype} batch rows, states`, { op: 'causal_conv1d', dtype, B: 2, D: 96, L: 33, W: 4, init: true, bias: true });
    }
    checkConv('i64 offsets and indices', { op: 'causal_conv1d', dtype: 'bf16', B: 1, D: 64, L: 9, W: 4, cu: [0, 4, 9], idx: [1, 0], slots: 2, idxDType: 'i64' });
  });

  it('causal_conv1d_update: decode rows over the conv pool (state_len 5 > W - 1), i32 / i64 indices; a new state without a pool', GT, () => {
    for (const idxDType of ['i32', 'i64'] as DType[]) {
      checkConv(`update ${idxDType}`, { op: 'causal_conv1d_update', dtype: 'bf16', B: 7, D: 8192, L: 1, W: 4, S: 5, ...glaDecodeSlots(7), idxDType, bias: true });
    }
    checkConv('update without a pool', { op: 'causal_conv1d_update', dtype: 'f32', B: 3, D: 200, L: 2, W: 4, S: 3 });
  });

  it('a decode step (conv update, then the delta rule) captured in a CUDA graph updates the pool rows the index tensor names at each replay', GT, () => {
    releasing((keep) => {
      const D = GRAPH_DECODE_ROWS;
      const slots = 8;
      const [Cd, W, H, HV, K, V] = [256, 4, 1, 2, 128, 128];
      const convIn = [rand([D, Cd], 'bf16', 7), rand([Cd, W], 'bf16', 8, { scale: 0.5 })].map(keep);
      const cpuIn = [rand([D, 1, H, K], 'bf16', 1), rand([D, 1, H, K], 'bf16', 2), rand([D, 1, HV, V], 'bf16', 3), deltaGate([D, 1, HV], 'bf16', 4, 'g'), deltaGate([D, 1, HV], 'bf16', 5, 'beta')].map(keep);
      const convPool = keep(rand([slots, Cd, W - 1], 'f32', 9));
      const pool = keep(rand([slots, HV, K, V], 'f32', 6, { scale: 0.5 }));
      const gConv = convIn.map((t) => keep(toGpu(t)));
      const gIn = cpuIn.map((t) => keep(toGpu(t)));
      const [gConvPool, gPool] = [keep(toGpu(convPool)), keep(toGpu(pool))];
      const attrs = { use_qk_l2norm_in_kernel: true };
      const step = (conv: Tensor[], convState: Tensor, ins: Tensor[], state: Tensor) => (i: Tensor) => [
        callOp('causal_conv1d_update', [conv[0]!, convState, conv[1]!, null, i], { activation: 'silu' })[0]!,
        callOp('fused_recurrent_gated_delta_rule', [...ins, state, null, i], attrs)[0]!,
      ];
      checkDecodeGraph(keep, step(gConv, gConvPool, gIn, gPool), step(convIn, convPool, cpuIn, pool), ['conv out', 'o'], [[gConvPool, convPool, 'conv pool'], [gPool, pool, 'recurrent pool']]);
    });
  });
});
