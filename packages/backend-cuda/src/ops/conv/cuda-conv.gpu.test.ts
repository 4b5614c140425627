/**
 * conv1d / conv2d / conv3d and conv_transpose on CUDA vs the float64 CPU backend, through the op registry: stride,
 * padding (incl. 'same' with an even kernel: asymmetric, so the fallback even where cuDNN exists), dilation, groups
 * incl. depthwise, bias, NCHW / channels-last / non-contiguous inputs, unbatched, bf16 / f16 / f32; every case on
 * cuDNN's graph API (which must take it), on cuDNN's legacy API, and on the implicit-GEMM fallback forced with
 * `conv.library = 'fallback'`; then TF32, the benchmark search, an operand off 16 bytes and a CUDA graph capture.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Tensor, callOp, type DType, type Tolerance } from '@fastkernels/core';
import { G, expectClose, gpu, toGpu, tolOf } from '../../../test/spine-helpers.js';
import { rand } from '../../../test/ops-helpers.js';
import type { ConvLibrary } from './conv-kernels.js';
import { cudnnAddon, cudnnState, type CudnnPlanInfo } from './cudnn-library.js';
import type { CudnnApi } from './cudnn-params.js';

const GT = { ...G, timeout: 600_000 };
const DTYPES: DType[] = ['bf16', 'f16', 'f32'];
type View = (t: Tensor) => Tensor;

interface Case {
  readonly label: string;
  readonly op: string;
  readonly x: number[];
  readonly w: number[];
  readonly bias: boolean;
  readonly attrs: Record<string, unknown>;
  /** Views taken of x (e.g. channels-last) and of w, alike on both backends. */
  readonly xView?: View;
  readonly wView?: View;
  /** cuDNN cannot take it (the fallback runs even in 'auto'). */
  readonly fallbackOnly?: boolean;
  /** A production shape cuDNN must take where it is present (f16 / bf16 / f32). */
  readonly cudnnMust?: boolean;
}

/** Calls cuDNN declined in 'auto' mode (they ran on the fallback and were checked there); printed at the end. */
const declines: string[] = [];
/** The graph engine each case ran on (printed at the end: what a benchmark or a regression hunt wants to know). */
const engines = new Map<string, string>();

/** Whether the loaded cuDNN has the backend (graph) API: then every case cuDNN can take must run on it. */
const graphApi = () => {
  const s = cudnnState();
  return !!s?.ok && s.apis.includes('graph');
};
const lastPlan = (): CudnnPlanInfo | null => cudnnAddon(gpu().runtime.addon).cudnnLastPlan();

/** A [N, C, *sp] view whose memory is channels-last (as x.contiguous(memory_format=torch.channels_last)). */
const channelsLast: View = (t) => {
  const r = t.rank;
  const order = [0, ...Array.from({ length: r - 2 }, (_, i) => i + 2), 1];
  const p = t.permute(order);
  const c = p.contiguous();
  p.dispose();
  const v = c.permute([0, r - 1, ...Array.from({ length: r - 2 }, (_, i) => i + 1)]);
  c.dispose();
  return v;
};
/** The left part of a wider tensor: non-contiguous rows. */
const narrowW = (t: Tensor) => t.narrow(t.rank - 1, 1, t.shape[t.rank - 1]! - 2);

const FIXED: Case[] = [
  { label: 'ResNet 3x3 s1 p1 + bias', op: 'conv2d', x: [2, 16, 14, 14], w: [32, 16, 3, 3], bias: true, attrs: { padding: 1 }, cudnnMust: true },
  { label: 'stem 7x7 s2 p3', op: 'conv2d', x: [1, 3, 32, 32], w: [8, 3, 7, 7], bias: false, attrs: { stride: 2, padding: 3 } },
  { label: 'dilation 2, groups 4, odd sizes', op: 'conv2d', x: [2, 8, 13, 11], w: [12, 2, 3, 3], bias: true, attrs: { padding: 2, dilation: 2, groups: 4 } },
  { label: 'depthwise 3x3 s2 + bias', op: 'conv2d', x: [2, 16, 10, 10], w: [16, 1, 3, 3], bias: true, attrs: { stride: 2, padding: 1, groups: 16 } },
  { label: 'depthwise channels-last (YOLOv10 SCDown)', op: 'conv2d', x: [1, 32, 20, 20], w: [32, 1, 3, 3], bias: true, attrs: { stride: 2, padding: 1, groups: 32 }, xView: channelsLast, wView: channelsLast },
  { label: '1x1 channels-last', op: 'conv2d', x: [2, 32, 8, 8], w: [24, 32, 1, 1], bias: true, attrs: {}, xView: channelsLast, cudnnMust: true },
  { label: 'YOLO 3x3 s2 channels-last, KCRS weight', op: 'conv2d', x: [1, 32, 20, 20], w: [64, 32, 3, 3], bias: true, attrs: { stride: 2, padding: 1 }, xView: channelsLast, cudnnMust: true },
  { label: 'non-contiguous input (narrowed rows)', op: 'conv2d', x: [2, 4, 9, 12], w: [6, 4, 3, 3], bias: true, attrs: { padding: [1, 0] }, xView: narrowW },
  { label: "padding='same', even kernel (asymmetric)", op: 'conv2d', x: [1, 4, 9, 9], w: [4, 4, 4, 4], bias: false, attrs: { padding: 'same' }, fallbackOnly: true },
  { label: 'unbatched [C, H, W]', op: 'conv2d', x: [8, 9, 9], w: [4, 8, 3, 3], bias: true, attrs: { stride: [2, 1] } },
  { label: 'conv1d groups 2, s2 p2 d2 + bias', op: 'conv1d', x: [2, 8, 50], w: [16, 4, 5], bias: true, attrs: { stride: 2, padding: 2, dilation: 2, groups: 2 } },
  { label: "conv1d padding='same' odd kernel", op: 'conv1d', x: [3, 6, 33], w: [6, 6, 3], bias: false, attrs: { padding: 'same' } },
  { label: 'conv3d groups 2 p1 + bias', op: 'conv3d', x: [1, 4, 6, 7, 8], w: [6, 2, 3, 3, 3], bias: true, attrs: { padding: 1, groups: 2 } },
  { label: 'conv3d channels-last s2', op: 'conv3d', x: [2, 8, 5, 6, 6], w: [8, 8, 3, 3, 3], bias: false, attrs: { stride: 2, padding: 1 }, xView: channelsLast },
  { label: 'conv_transpose2d s2 p1 op1 groups 2 + bias', op: 'conv_transpose2d', x: [2, 6, 7, 7], w: [6, 4, 3, 3], bias: true, attrs: { stride: 2, padding: 1, output_padding: 1, groups: 2 } },
  { label: 'conv_transpose1d s3', op: 'conv_transpose1d', x: [2, 4, 10], w: [4, 3, 4], bias: false, attrs: { stride: 3 } },
];

/** Random conv2d cases: stride, padding, dilation, groups (incl. depthwise), bias and layout drawn from a seeded rng. */
function randomCases(seed: number, count: number): Case[] {
  let s = seed >>> 0;
  const next = (n: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
  const out: Case[] = [];
  while (out.length < count) {
    const groups = [1, 1, 2, 4, 0][next(5)]!; // 0: depthwise
    const cg = 1 + next(6);
    const C = groups === 0 ? 4 + next(12) : cg * groups;
    const G = groups === 0 ? C : groups;
    const K = G * (1 + next(3));
    const k = [1, 3, 5][next(3)]!;
    const stride = 1 + next(2);
    const dil = 1 + next(2);
    const pad = next(3);
    const H = 5 + next(14);
    const W = 5 + next(14);
    if (H + 2 * pad < dil * (k - 1) + 1 || W + 2 * pad < dil * (k - 1) + 1) continue;
    const cl = next(2) === 1;
    out.push({
      label: `random ${out.length}: [2, ${C}, ${H}, ${W}] k${k} s${stride} p${pad} d${dil} g${G}${cl ? ' channels-last' : ''}`,
      op: 'conv2d',
      x: [2, C, H, W],
      w: [K, C / G, k, k],
      bias: next(2) === 1,
      attrs: { stride, padding: pad, dilation: dil, groups: G },
      ...(cl ? { xView: channelsLast } : {}),
    });
  }
  return out;
}

const CASES = [...FIXED, ...randomCases(7, 10)];

/**
 * Both backends on the same values and views; CUDA must take its registered kernel on the expected path. `api`: the
 * cuDNN API asked for ('graph' must take every case cuDNN can, where the loaded cuDNN has it).
 */
function check(c: Case, dtype: DType, library: ConvLibrary, tol: Tolerance, seed: number, api: CudnnApi = 'auto'): void {
  const conv = gpu().generatedOps.conv;
  conv.cudnnApi = api;
  const owned: Tensor[] = [];
  const keep = <T extends Tensor>(t: T) => (owned.push(t), t);
  try {
    const reduce = c.w.slice(1).reduce((a, b) => a * b, 1);
    const xs = keep(rand(c.x, dtype, seed));
    const ws = keep(rand(c.w, dtype, seed + 1, { scale: 1 / Math.sqrt(reduce) }));
    const outC = c.op.startsWith('conv_transpose') ? c.w[1]! * ((c.attrs.groups as number | undefined) ?? 1) : c.w[0]!;
    const bs = c.bias ? keep(rand([outC], dtype, seed + 2)) : null;
    const view = (t: Tensor, v?: View) => (v ? keep(v(t)) : t);
    const cpuIn = [view(xs, c.xView), view(ws, c.wView), bs];
    const gpuIn = [view(keep(toGpu(xs)), c.xView), view(keep(toGpu(ws)), c.wView), bs && keep(toGpu(bs))];
    const want = keep(callOp(c.op, cpuIn, c.attrs)[0]!);
    const got = keep(callOp(c.op, gpuIn, c.attrs)[0]!);
    const label = `${c.label} ${dtype} ${library}${library === 'fallback' ? '' : ` ${api}`}`;
    if (library === 'fallback' || c.fallbackOnly || !cudnnState()?.ok) expect(conv.lastPath, `${label}: path`).toBe('fallback');
    else if (api === 'graph' && graphApi()) {
      // the point of the graph path: every shape cuDNN can take runs on one of its engines
      expect(conv.lastPath, `${label}: path (${conv.lastDeclineReason})`).toBe('cudnn');
      const plan = lastPlan();
      expect(plan?.api, `${label}: API (${plan?.graphDeclined})`).toBe('graph');
      engines.set(label, plan!.engineName);
    } else if (library === 'cudnn' || (c.cudnnMust && dtype !== 'f32')) expect(conv.lastPath, `${label}: path (${conv.lastDeclineReason})`).toBe('cudnn');
    else if (conv.lastPath !== 'cudnn') declines.push(`${label}: ${conv.lastDeclineReason}`); // reported, not failed: cuDNN may refuse a corner
    if (api === 'legacy' && conv.lastPath === 'cudnn') expect(lastPlan()?.api, `${label}: API`).toBe('legacy');
    expect(got.shape, `${label}: shape`).toEqual(want.shape);
    expectClose(got, want, tol, label);
  } finally {
    for (const t of owned.reverse()) t.dispose();
  }
}

describe('CUDA convs vs the float64 CPU backend', () => {
  afterAll(() => {
    if (declines.length) console.log(`cuDNN declined ${declines.length} call(s) in 'auto' (run and checked on the fallback):\n  ${declines.join('\n  ')}`);
    if (engines.size) console.log(`graph engines:\n  ${[...engines].map(([k, v]) => `${k}: ${v}`).join('\n  ')}`);
    const conv = gpu().generatedOps.conv;
    conv.library = 'auto';
    conv.cudnnApi = 'auto';
    conv.algoSearch = 'heuristic';
    conv.allowTf32 = true;
  });

  const PATHS: { library: ConvLibrary; api: CudnnApi; name: string }[] = [
    { library: 'auto', api: 'graph', name: "cuDNN's graph API (where present)" },
    { library: 'auto', api: 'legacy', name: "cuDNN's legacy API (where present)" },
    { library: 'fallback', api: 'auto', name: 'forced implicit-GEMM fallback' },
  ];
  for (const { library, api, name } of PATHS) {
    for (const dtype of DTYPES) {
      it(`${name}, ${dtype}: ${CASES.length} shapes`, GT, () => {
        const conv = gpu().generatedOps.conv;
        conv.library = library;
        conv.allowTf32 = false; // exact f32 here (tensor-core engines left out); TF32 below
        CASES.forEach((c, i) => check(c, dtype, library, tolOf(dtype), 100 * i + 1, api));
      });
    }
  }

  it('f32 with TF32 (PyTorch\'s default for cuDNN convs) stays within 1e-2 of float64, on both APIs', GT, () => {
    const conv = gpu().generatedOps.conv;
    conv.library = 'auto';
    conv.allowTf32 = true;
    for (const api of ['graph', 'legacy'] as CudnnApi[]) for (const c of FIXED.slice(0, 7)) check(c, 'f32', 'auto', { atol: 1e-2, rtol: 1e-2 }, 5, api);
  });

  it("algoSearch 'benchmark' times graph plans on the first call and keeps one that matches float64", GT, () => {
    const conv = gpu().generatedOps.conv;
    conv.library = 'auto';
    conv.allowTf32 = false;
    conv.algoSearch = 'benchmark';
    try {
      for (const c of [...FIXED.slice(0, 7).filter((k) => k.cudnnMust || k.label.startsWith('depthwise')), FIXED.find((k) => k.op === 'conv_transpose2d')!]) {
        for (const dtype of ['f16', 'f32'] as DType[]) {
          check(c, dtype, 'auto', tolOf(dtype), 11, 'graph');
          if (!graphApi()) continue;
          const plan = lastPlan()!;
          expect(plan.searched, `${c.label} ${dtype}: searched`).toBe(true);
          expect(plan.timedPlans, `${c.label} ${dtype}: plans timed (${plan.note})`).toBeGreaterThan(0);
          expect(plan.measuredMs).toBeGreaterThan(0);
          check(c, dtype, 'auto', tolOf(dtype), 12, 'graph'); // the kept plan, from the cache
        }
      }
    } finally {
      conv.algoSearch = 'heuristic';
    }
  });

  it('an input off 16 bytes (a view one element into its storage) runs on a graph plan of its own alignment', GT, () => {
    const conv = gpu().generatedOps.conv;
    conv.library = 'auto';
    for (const dtype of ['f16', 'f32'] as DType[]) {
      const shape = [2, 16, 9, 9];
      const n = shape.reduce((a, b) => a * b, 1);
      const flat = rand([n + 1], dtype, 41);
      const w = rand([8, 16, 3, 3], dtype, 42, { scale: 1 / 12 });
      const x = flat.narrow(0, 1, n).view(shape);
      const gx = toGpu(flat);
      const gxv = gx.narrow(0, 1, n).view(shape);
      const gw = toGpu(w);
      try {
        const want = callOp('conv2d', [x, w, null], { padding: 1 })[0]!;
        const got = callOp('conv2d', [gxv, gw, null], { padding: 1 })[0]!;
        expect(conv.lastPath).toBe(cudnnState()?.ok ? 'cudnn' : 'fallback');
        if (graphApi()) expect(lastPlan()?.api, `${dtype}: ${lastPlan()?.graphDeclined}`).toBe('graph');
        expectClose(got, want, tolOf(dtype), `misaligned ${dtype}`);
        want.dispose();
        got.dispose();
      } finally {
        for (const t of [gxv, gx, gw, x, flat, w]) t.dispose();
      }
    }
  });

  it('captures into a CUDA graph (handle and workspace made before capture) and replays as eager ran', GT, () => {
    const b = gpu();
    const conv = b.generatedOps.conv;
    const rt = b.runtime;
    conv.cudnnApi = 'auto';
    for (const library of ['auto', 'fallback'] as ConvLibrary[]) {
      conv.library = library;
      const xh = rand([2, 32, 20, 20], 'f16', 31);
      const x0 = toGpu(xh);
      const x = channelsLast(x0);
      const w = toGpu(rand([64, 32, 3, 3], 'f16', 32, { scale: 0.05 }));
      const bias = toGpu(rand([64], 'f16', 33));
      const step = () => callOp('conv2d', [x, w, bias], { stride: 2, padding: 1 })[0]!;
      const eager = step();
      const want = eager.toFloat64Array();
      let out: Tensor | undefined;
      const g = rt.capture(() => {
        out = step();
      }, { poolBytes: 64 << 20 });
      out!.fill_(0);
      g.replay();
      expect(out!.toFloat64Array(), `${library}: replay`).toEqual(want);
      expect(conv.lastPath).toBe(library === 'fallback' || !cudnnState()?.ok ? 'fallback' : 'cudnn');
      if (library === 'auto' && graphApi()) expect(lastPlan()?.api, 'captured plan API').toBe('graph');
      out!.dispose();
      g.destroy();
      for (const t of [eager, x, x0, xh, w, bias]) t.dispose();
    }
    conv.library = 'auto';
  });

  it("algoSearch 'benchmark': a capture replays the plan the eager call measured (searched, same engine), and replays right", GT, () => {
    const b = gpu();
    const conv = b.generatedOps.conv;
    if (!cudnnState()?.ok || !graphApi()) return;
    conv.library = 'auto';
    conv.cudnnApi = 'auto';
    conv.algoSearch = 'benchmark';
    const [xh, wh] = [rand([1, 64, 20, 20], 'f16', 51), rand([64, 1, 3, 3], 'f16', 52, { scale: 0.2 })];
    const x0 = toGpu(xh);
    const x = channelsLast(x0);
    const w = toGpu(wh);
    try {
      const step = () => callOp('conv2d', [x, w, null], { padding: 1, groups: 64 })[0]!; // a depthwise 3x3, YOLOv10's CIB kind
      const eager = step();
      const measured = lastPlan()!;
      expect(measured.searched).toBe(true);
      let out: Tensor | undefined;
      const g = b.runtime.capture(() => {
        out = step();
      }, { poolBytes: 16 << 20 });
      const captured = lastPlan()!;
      expect(captured).toMatchObject({ searched: true, engineName: measured.engineName });
      out!.fill_(0);
      g.replay();
      expect(out!.toFloat64Array()).toEqual(eager.toFloat64Array());
      out!.dispose();
      g.destroy();
      eager.dispose();
    } finally {
      conv.algoSearch = 'heuristic';
      for (const t of [x, x0, w, xh, wh]) t.dispose();
    }
  });

  it('doctor names cuDNN: its version and file, or every place tried', GT, () => {
    const v = gpu().versions();
    const s = cudnnState();
    expect(s).toBeDefined();
    if (s!.ok) expect(v.cudnn).toMatch(/^\d+\.\d+\.\d+$/);
    else expect(v.cudnn).toMatch(/^unavailable: cuDNN not found: tried /);
  });

  it("library 'cudnn' runs on cuDNN or reports why it cannot", GT, () => {
    const conv = gpu().generatedOps.conv;
    conv.library = 'cudnn';
    try {
      const c = FIXED[0]!;
      if (cudnnState()?.ok) check(c, 'f16', 'cudnn', tolOf('f16'), 9);
      else expect(() => check(c, 'f16', 'cudnn', tolOf('f16'), 9)).toThrow(/cuDNN not found/);
    } finally {
      conv.library = 'auto';
    }
  });
});
