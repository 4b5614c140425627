/**
 * What the recurrent kernels' GPU tests share (gla, gdn, kda .gpu.test.ts): the time limit, the delta rules' gates,
 * one checker for the four delta-rule ops (gated delta rule and KDA, recurrent and chunked) against the float64 CPU
 * op, the state pool's rows compared after a pooled call, and a decode step captured in a CUDA graph and replayed for
 * other pool rows.
 */
import { F, Tensor, callOp, opRoute, type DType } from '@fastkernels/core';
import { expect } from 'vitest';
import { G, cpu, expectClose, gpu, releasing, tolOf, toGpu } from './spine-helpers.js';
import type { RecurrentCaseShape } from './gla-cases.js';
import { rand } from './ops-helpers.js';
import { DELTA_OPS, type DeltaOp } from '../src/ops/recurrent/gdn-plan.js';

/** The GPU host runs these under a time limit, the float64 CPU op the slow half. */
export const GT = { ...G, timeout: 600_000 };
export const sms = () => gpu().runtime.properties().multiprocessors;

type Keep = <T extends Tensor | readonly Tensor[]>(t: T) => T;

/** The delta rules' gates: g = -softplus(x) / 2 (log decay), beta = sigmoid(x), rounded to dtype. */
export function deltaGate(shape: number[], dtype: DType, seed: number, kind: 'g' | 'beta'): Tensor {
  const x = rand(shape, 'f64', seed);
  const d = x.toFloat64Array().map((z) => (kind === 'g' ? -Math.log1p(Math.exp(z)) / 2 : 1 / (1 + Math.exp(-z))));
  x.dispose();
  return Tensor.fromArray(cpu(), d, shape, dtype);
}

/**
 * A pool after a pooled call: the rows the indices name hold the CPU's states (f32 tolerance), every other row
 * (padding's too) what it held before, bit for bit.
 */
export function expectPoolRows(label: string, keep: Keep, pools: { after: Float64Array; want: Float64Array; before: Float64Array }, idx: readonly number[], slots: number, per: number): void {
  for (let sl = 0; sl < slots; sl++) {
    const a = pools.after.subarray(sl * per, (sl + 1) * per);
    if (!idx.includes(sl)) {
      expect(a.every((x, i) => x === pools.before[sl * per + i]), `${label}: pool slot ${sl} untouched`).toBe(true);
      continue;
    }
    const row = (d: Float64Array) => Tensor.fromArray(cpu(), d, [per], 'f32');
    expectClose(keep(row(a)), keep(row(pools.want.subarray(sl * per, (sl + 1) * per))), tolOf('f32'), `${label}: pool slot ${sl}`);
  }
}

export interface DeltaRuleCase extends RecurrentCaseShape {
  readonly op: DeltaOp;
  readonly dtype: DType;
  readonly gDType?: DType;
  readonly HV: number;
  /** cu_seqlens' dtype (default i32). */
  readonly cuDType?: DType;
  readonly idxDType?: DType;
  readonly l2norm?: boolean;
  /** KDA: g stored [B, HV, T, K] and passed as its [B, T, HV, K] view. */
  readonly permuteG?: boolean;
  /** The pool to run over (a chunked prefill carries one across calls); else a fresh random one. */
  readonly pool?: { cpu: Tensor; gpu: Tensor };
  /** Added to every input's seed (the pool's excepted). */
  readonly seed?: number;
}

/**
 * One delta-rule op on CUDA (its kernel must take it) vs the float64 CPU op on the same values: o, the final state, or
 * the pool rows. g is a decay a head (gated delta rule, [B, T, HV]) or a key channel (KDA, [B, T, HV, K]).
 */
export function checkDeltaRule(label: string, c: DeltaRuleCase): void {
  releasing((keep) => {
    const { op, B, T, H, HV, K, V, dtype } = c;
    const N = c.cu ? c.cu.length - 1 : B;
    const seed = c.seed ?? 0;
    const pooled = c.idx !== undefined;
    const live = (c.idx ?? []).filter((s) => s >= 0);
    expect(new Set(live).size, `${label}: every live row its own pool slot`).toBe(live.length);
    const l2 = c.l2norm ?? true;
    // without the in-kernel l2norm, q and k come normalised (the delta rule's domain)
    const qk = (s: number) => {
      const x = keep(rand([B, T, H, K], dtype, seed + s));
      return l2 ? x : keep(F.l2Norm(x));
    };
    const q = qk(1);
    const k = qk(2);
    const v = keep(rand([B, T, HV, V], dtype, seed + 3));
    const gDType = c.gDType ?? dtype;
    const g =
      DELTA_OPS[op].gate === 'head'
        ? keep(deltaGate([B, T, HV], gDType, seed + 4, 'g'))
        : c.permuteG
          ? keep(keep(deltaGate([B, HV, T, K], gDType, seed + 4, 'g')).permute([0, 2, 1, 3]))
          : keep(deltaGate([B, T, HV, K], gDType, seed + 4, 'g'));
    const beta = keep(deltaGate([B, T, HV], dtype, seed + 5, 'beta'));
    const s0 = c.pool?.cpu ?? (pooled || c.init ? keep(rand(pooled ? [c.slots!, HV, K, V] : [N, HV, K, V], 'f32', 6, { scale: 0.5 })) : null);
    const cu = c.cu ? keep(Tensor.fromArray(cpu(), c.cu, [c.cu.length], c.cuDType ?? 'i32')) : null;
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
    if (pooled) expectPoolRows(label, keep, { after: gS0!.toFloat64Array(), want: s0!.toFloat64Array(), before: poolBefore! }, c.idx!, s0!.shape[0]!, HV * K * V);
  });
}

/** The decode batch a captured step runs: its rows' pool slots are rewritten between replays. */
export const GRAPH_DECODE_ROWS = 4;

/**
 * A decode step over state pools captured in a CUDA graph updates the pool rows the index tensor names at each replay:
 * `step(idx)` runs on the GPU inputs (compiled outside the capture first, which advances rows 0-3 once; `cpuStep` the
 * same on the CPU's), then each replay for other rows is held to the CPU's step: its outputs (named `outputs`, bf16
 * tolerance) and the pools ([gpu, cpu, name], f32).
 */
export function checkDecodeGraph(keep: Keep, step: (idx: Tensor) => Tensor[], cpuStep: (idx: Tensor) => Tensor[], outputs: readonly string[], pools: readonly (readonly [Tensor, Tensor, string])[]): void {
  const D = GRAPH_DECODE_ROWS;
  const gIdx = keep(Tensor.zeros(gpu(), [D], 'i32'));
  const setIdx = (vals: number[]) => gpu().write(gIdx.storage, 0, new Uint8Array(Int32Array.from(vals).buffer));
  const cpuRun = (vals: number[]) => keep(cpuStep(keep(Tensor.fromArray(cpu(), vals, [D], 'i32'))));
  setIdx([0, 1, 2, 3]);
  keep(step(gIdx)); // compiles the kernels outside the capture; pool rows 0-3 advance once
  cpuRun([0, 1, 2, 3]);
  let out: Tensor[] = [];
  const graph = gpu().runtime.capture(() => {
    out = step(gIdx);
  }, { poolBytes: 16 << 20 });
  try {
    for (const vals of [[7, -1, 5, 0], [3, 6, -1, 4]]) {
      setIdx(vals);
      graph.replay();
      const want = cpuRun(vals);
      outputs.forEach((name, i) => expectClose(out[i]!, want[i]!, tolOf('bf16'), `graph replay ${vals}: ${name}`));
      for (const [g, c, name] of pools) expectClose(g, c, tolOf('f32'), `graph replay ${vals}: ${name}`);
    }
  } finally {
    for (const t of out) t.dispose();
    graph.destroy();
  }
}
