import { describe, expect, it } from 'vitest';
import type { Backend, Storage, Timer } from '../backend.js';
import { elementAccessor, DTYPE_INFO } from '../dtype.js';
import { Module } from '../module.js';
import type { Ops } from '../ops.js';
import { ModuleRegistry } from '../registry.js';
import { forEachOffset } from '../shape.js';
import { defineTask, hostArgsFor } from '../task.js';
import { Tensor } from '../tensor.js';
import { benchTask, cloneLayout, type CaseResult } from './bench.js';
import { BenchReportSchema } from './report.js';
import { summarizeResults } from './summary.js';

// ---- a minimal host backend: storage, strided fill/copy, a wall-clock timer ---------------------
let live = 0;
class HostStorage implements Storage {
  readonly hostBytes: Uint8Array;
  private refs = 1;
  constructor(readonly backend: Backend, readonly byteLength: number) {
    this.hostBytes = new Uint8Array(byteLength);
    live++;
  }
  readonly device = 0;
  retain(): void {
    this.refs++;
  }
  release(): void {
    if (--this.refs === 0) live--;
  }
  get released(): boolean {
    return this.refs <= 0;
  }
}
const unsupported = (name: string) => () => {
  throw new Error(`${name} not in the test backend`);
};
const hostOps = {
  fill(dst: Tensor, v: number) {
    const acc = elementAccessor(dst.dtype, dst.storage.hostBytes!);
    forEachOffset(dst.shape, dst.strides, dst.offset, (o) => acc.set(o, v));
  },
  copy(dst: Tensor, src: Tensor) {
    const s = elementAccessor(src.dtype, src.storage.hostBytes!);
    const vals: number[] = [];
    forEachOffset(src.shape, src.strides, src.offset, (o) => vals.push(s.get(o)));
    const d = elementAccessor(dst.dtype, dst.storage.hostBytes!);
    forEachOffset(dst.shape, dst.strides, dst.offset, (o, i) => d.set(o, vals[i]!));
  },
} as Partial<Ops>;
const testBackend: Backend = {
  name: 'test-host',
  availability: () => ({ available: true }),
  devices: () => [{ backend: 'test-host', index: 0, name: 'host', totalMemory: 0, multiprocessors: 1, l2CacheBytes: 0 }],
  capabilities: { graphs: false, collectives: false, kernelLanguages: ['typescript'] },
  ops: new Proxy(hostOps, { get: (t, k: string) => (t as Record<string, unknown>)[k] ?? unsupported(k) }) as Ops,
  allocate: (n) => new HostStorage(testBackend, n),
  write: (dst, off, src) => dst.hostBytes!.set(src, off),
  read: (src, off, n) => src.hostBytes!.slice(off, off + n),
  copyBytes: (dst, doff, src, soff, n) => dst.hostBytes!.set(src.hostBytes!.subarray(soff, soff + n), doff),
  synchronize: () => {},
  createTimer: (): Timer => {
    let t0 = 0;
    let t1 = 0;
    return { start: () => void (t0 = performance.now()), stop: () => void (t1 = performance.now()), elapsedMs: () => t1 - t0 };
  },
  versions: () => ({ test: '1' }),
};

// ---- a tiny task: y = x * weight (over the last dim) ---------------------------------------------
function scaleHost(x: Tensor, w: Tensor, bias = 0): Tensor {
  const xs = x.toFloat64Array();
  const ws = w.toFloat64Array();
  const h = ws.length;
  return Tensor.fromArray(x.backend, xs.map((v, i) => v * ws[i % h]! + bias), x.shape, x.dtype);
}
class Scale extends Module {
  readonly weight: Tensor;
  constructor(readonly hidden: number) {
    super();
    this.weight = this.parameter('weight', [hidden]);
  }
  forward(x: Tensor): Tensor {
    return scaleHost(x, this.weight);
  }
}
const scaleTask = defineTask(
  {
    id: 'L1/scale',
    level: 1,
    className: 'Scale',
    family: ['test'],
    architectures: ['test'],
    mirrors: 'test.Scale',
    description: 'y = x * w',
    init: [{ name: 'hidden', type: 'int' }],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'H'] }],
    cases: {
      ci: [
        { name: 'a', dtype: 'f32', dims: { T: 4, H: 8 }, init: [8] },
        { name: 'b', dtype: 'f32', dims: { T: 3, H: 16 }, init: [16] },
      ],
      production: [{ name: 'p', dtype: 'f32', dims: { T: 64, H: 64 }, init: [64] }],
    },
  },
  {
    baseline: Scale,
    makeInputs: (c, ctx, rng) => {
      const n = c.dims.T! * c.dims.H!;
      return [Tensor.fromArray(ctx.backend, rng.fillNormal(n), [c.dims.T!, c.dims.H!], c.dtype)];
    },
    reference: ([x], params) => {
      const w = params.get('weight')!.data;
      return [{ shape: x!.shape, data: x!.data.map((v, i) => v * w[i % w.length]!) }];
    },
    work: () => ({ bytes: 0, flops: 0 }),
  },
);

class CorrectScale extends Module {
  readonly weight: Tensor;
  constructor(hidden: number) {
    super();
    this.weight = this.parameter('weight', [hidden]);
  }
  forward(x: Tensor): Tensor {
    const out = Tensor.empty(x.backend, x.shape, x.dtype);
    const xs = new Float32Array(x.toHostBytes().buffer);
    const ws = new Float32Array(this.weight.toHostBytes().buffer);
    const o = new Float32Array(out.storage.hostBytes!.buffer);
    for (let i = 0; i < xs.length; i++) o[i] = xs[i]! * ws[i % ws.length]!;
    return out;
  }
}
class WrongScale extends Scale {
  override forward(x: Tensor): Tensor {
    return scaleHost(x, this.weight, 0.5);
  }
}
class ThrowingScale extends Scale {
  override forward(_x: Tensor): Tensor {
    throw new Error('kernel launch failed: boom');
  }
}
/** Writes y into x's memory and returns x; also scribbles over the weight-free input afterwards. */
class InPlaceScale extends Scale {
  override forward(x: Tensor): Tensor {
    const y = scaleHost(x, this.weight);
    x.copy_(y);
    y.dispose();
    return x;
  }
}
/** Correct result, then destroys its input (must not affect the baseline or the golden check). */
class InputClobberingScale extends Scale {
  override forward(x: Tensor): Tensor {
    const y = scaleHost(x, this.weight);
    x.fill_(1e6);
    return y;
  }
}
class BadCtorScale extends Module {
  constructor(_hidden: number) {
    super();
    throw new Error('no such device');
  }
  forward(): Tensor {
    throw new Error('unreachable');
  }
}

function setup(cls?: new (...a: any[]) => Module) {
  const baseline = new ModuleRegistry();
  baseline.registerTask(scaleTask);
  const candidate = baseline.child('candidates');
  if (cls) candidate.override('L1/scale', cls);
  return { baseline, candidate };
}

const run = (cls: (new (...a: any[]) => Module) | undefined, extra: Partial<Parameters<typeof benchTask>[0]> = {}) =>
  benchTask({ task: scaleTask, ...setup(cls), backend: testBackend, iters: 10, warmup: 1, ...extra });

describe('benchTask', () => {
  it('passes a correct candidate, times it and reports the golden check', async () => {
    const before = live;
    const rs = await run(CorrectScale);
    expect(rs.map((r) => r.status)).toEqual(['PASSED', 'PASSED']);
    for (const r of rs) {
      expect(r.baselineMs).toBeGreaterThan(0);
      expect(r.candidateMs).toBeGreaterThan(0);
      expect(r.speedup).toBeGreaterThan(0);
      expect(r.ciLow!).toBeLessThanOrEqual(r.speedup!);
      expect(r.ciHigh!).toBeGreaterThanOrEqual(r.speedup!);
      expect(r.iters).toBe(10);
      expect(r.rounds).toBe(3);
      // the case's wall time covers its timed calls: 10 a side, half of them at least the side's median
      expect(r.wallMs!).toBeGreaterThanOrEqual(5 * (r.baselineMs! + r.candidateMs!));
      expect(r.golden?.baseline.status).toBe('PASSED');
      expect(r.golden?.candidate.status).toBe('PASSED');
    }
    expect(live).toBe(before); // every tensor allocated was disposed
  });

  it('flags a wrong candidate INCORRECT_NUMERICAL without timing it', async () => {
    const [r] = await run(WrongScale);
    expect(r!.status).toBe('INCORRECT_NUMERICAL');
    expect(r!.maxAbsError).toBeCloseTo(0.5, 5);
    expect(r!.speedup).toBeNull();
    expect(r!.detail).toMatch(/within atol/);
    expect(r!.golden?.candidate.status).toBe('INCORRECT_NUMERICAL');
  });

  it('turns a throwing candidate into RUNTIME_ERROR with the message', async () => {
    const before = live;
    const rs = await run(ThrowingScale);
    expect(rs[0]!.status).toBe('RUNTIME_ERROR');
    expect(rs[0]!.detail).toContain('kernel launch failed: boom');
    expect(live).toBe(before);
  });

  it('turns a throwing constructor into RUNTIME_ERROR', async () => {
    const [r] = await run(BadCtorScale);
    expect(r!.status).toBe('RUNTIME_ERROR');
    expect(r!.detail).toMatch(/constructor: no such device/);
  });

  it('a baseline failure is SKIPPED, not the candidate\'s fault', async () => {
    const { baseline, candidate } = setup(CorrectScale);
    const broken = { ...scaleTask, makeInputs: () => { throw new Error('bad case'); } };
    const [r] = await benchTask({ task: broken, baseline, candidate, backend: testBackend, iters: 2 });
    expect(r!.status).toBe('SKIPPED');
    expect(r!.detail).toMatch(/baseline failed \(makeInputs\): bad case/);
  });

  it('gives each side its own inputs: in-place and input-clobbering candidates pass', async () => {
    for (const cls of [InPlaceScale, InputClobberingScale]) {
      const rs = await run(cls);
      expect(rs.map((r) => r.status)).toEqual(['PASSED', 'PASSED']);
      expect(rs[0]!.golden?.baseline.status).toBe('PASSED');
    }
  });

  it('clones keep non-contiguous layouts', () => {
    const t = Tensor.fromArray(testBackend, [1, 2, 3, 4, 5, 6], [2, 3], 'f32').transpose(0, 1);
    const c = cloneLayout(t);
    expect(c.strides).toEqual(t.strides);
    expect(c.toNested()).toEqual(t.toNested());
    expect(c.storage).not.toBe(t.storage);
    t.dispose();
    c.dispose();
  });

  it('self-test: baseline vs baseline passes with a CI around 1', async () => {
    const rs = await benchTask({ task: scaleTask, ...setup(), backend: testBackend, iters: 300, warmup: 10, cases: [scaleTask.cases.production[0]!] });
    const r = rs[0]!;
    expect(r.status).toBe('PASSED');
    expect(r.maxAbsError).toBe(0);
    // A 95% interval of identical code misses 1 in some runs by construction (CI once: [1.0004, ...] on a busy CPU), so
    // this checks for a bias beyond timing noise: the interval reaches within 2% of 1 on both sides.
    expect(r.ciLow!).toBeLessThanOrEqual(1.02);
    expect(r.ciHigh!).toBeGreaterThanOrEqual(0.98);
    expect(r.ciLow!).toBeLessThanOrEqual(r.ciHigh!);
  });

  it("the harness's own work between timed pairs (a progress report) comes before each side equally often", async () => {
    // A report wakes the parent process and the IPC pipe: the call after it runs slower. Alternating the order pair by
    // pair put a candidate after every report (one every 8 pairs), and CPU self-tests read the baselines 2-8% slower
    // as candidates; the order now flips at each report.
    let pending = false;
    const hits = { baseline: 0, candidate: 0 };
    class CountingScale extends Scale {
      override forward(x: Tensor): Tensor {
        if (pending) hits[this instanceof CandidateScale ? 'candidate' : 'baseline']++;
        pending = false;
        return super.forward(x);
      }
    }
    class CandidateScale extends CountingScale {}
    const baseline = new ModuleRegistry();
    baseline.registerTask({ ...scaleTask, baseline: CountingScale });
    const candidate = baseline.child('candidates');
    candidate.override('L1/scale', CandidateScale);
    const onProgress = (p: { phase: string }) => void (pending = p.phase === 'timing');
    const [r] = await benchTask({ task: scaleTask, baseline, candidate, backend: testBackend, iters: 200, warmup: 2, cases: [scaleTask.cases.ci[0]!], onProgress });
    expect(r!.status).toBe('PASSED');
    expect(hits.baseline + hits.candidate).toBeGreaterThanOrEqual(24);
    expect(Math.abs(hits.baseline - hits.candidate)).toBeLessThanOrEqual(1);
  });

  it('reports progress and respects rounds', async () => {
    const phases = new Set<string>();
    const rs = await run(CorrectScale, { rounds: 5, onProgress: (p) => phases.add(p.phase) });
    expect(rs[0]!.rounds).toBe(5);
    expect([...phases]).toEqual(expect.arrayContaining(['build', 'correctness', 'warmup', 'timing', 'done']));
  });
});

describe('summarizeResults and the report schema', () => {
  const mk = (task: string, level: number, status: CaseResult['status'], speedup: number | null): CaseResult => ({
    task, level, case: 'c', dtype: 'f32', status, maxAbsError: 0, maxRelError: 0, matchedRatio: 1,
    baselineMs: speedup ? 1 : null, candidateMs: speedup ? 1 / speedup : null, speedup, ciLow: speedup ? speedup * 0.9 : null, ciHigh: speedup ? speedup * 1.1 : null, rounds: 3, iters: 10,
  });

  it('counts correct tasks per level, geomean over correct tasks, fast_1 and fast_2', () => {
    const s = summarizeResults([
      mk('L1/a', 1, 'PASSED', 4), { ...mk('L1/a', 1, 'PASSED', 1), case: 'd' }, // geomean 2 -> fast_1, not fast_2
      mk('L1/b', 1, 'PASSED', 0.5),
      mk('L1/c', 1, 'INCORRECT_NUMERICAL', null),
      mk('L1/d', 1, 'SKIPPED', null),
      mk('L2/e', 2, 'PASSED', 3),
    ]);
    const a = s.tasks.find((t) => t.task === 'L1/a')!;
    expect(a.speedup).toBeCloseTo(2, 10);
    expect(a.fast1).toBe(true);
    expect(a.fast2).toBe(false);
    expect(s.levels[0]).toMatchObject({ level: 1, benched: 3, correct: 2, fast1: 1, fast2: 0 });
    expect(s.levels[0]!.geomeanSpeedup).toBeCloseTo(1, 10); // sqrt(2 * 0.5)
    expect(s.levels[1]).toMatchObject({ level: 2, benched: 1, correct: 1, fast1: 1, fast2: 1 });
    expect(s.total).toMatchObject({ benched: 4, correct: 3, fast1: 2, fast2: 1, skipped: 1, fast1Ratio: 0.5, fast2Ratio: 0.25 });
  });

  it('a bench run validates against BenchReportSchema', async () => {
    const results = [...(await run(CorrectScale)), ...(await run(ThrowingScale))];
    const report = {
      version: 1, createdAt: new Date().toISOString(), complete: true, candidates: 'x', backend: 'test-host',
      device: { index: 0, name: 'host', totalMemory: 0, multiprocessors: 1 }, versions: {},
      options: { rounds: 3, iters: 10, warmup: 1, warmupMs: 0, seed: 200, shapes: 'ci' }, results, summary: summarizeResults(results),
    };
    expect(BenchReportSchema.safeParse(JSON.parse(JSON.stringify(report))).success).toBe(true);
    expect(BenchReportSchema.safeParse({ ...report, results: [{ ...results[0], status: 'GREAT' }] }).success).toBe(false);
  });
});

// ---- host inputs: values forward gets after the tensors (the sampler's hint) -----------------------------------
/** What each call of a hinted module was given, by side. */
const seenHints: { side: string; hint: unknown }[] = [];
class HintedScale extends Scale {
  protected side = 'baseline';
  override forward(x: Tensor, hint?: { positives: number }): Tensor {
    seenHints.push({ side: this.side, hint: hint === undefined ? undefined : { ...hint } });
    return scaleHost(x, this.weight);
  }
}
class HintedCandidate extends HintedScale {
  protected override side = 'candidate';
}
/** Correct output, then rewrites its hint: would mislead a baseline that shared the object on a later call. */
class HintTampering extends HintedScale {
  protected override side = 'candidate';
  override forward(x: Tensor, hint?: { positives: number }): Tensor {
    const y = super.forward(x, hint);
    if (hint) hint.positives = -1;
    return y;
  }
}
const positives = (x: Tensor) => x.toFloat64Array().filter((v) => v > 0).length;
const hintedTask = defineTask(
  { ...scaleTask, id: 'L1/scale_hinted', className: 'HintedScale', hostInputs: [{ name: 'hint', doc: 'positive entries of x' }] },
  {
    baseline: HintedScale,
    makeInputs: (c, ctx, rng) => [Tensor.fromArray(ctx.backend, rng.fillNormal(c.dims.T! * c.dims.H!), [c.dims.T!, c.dims.H!], c.dtype)],
    hostArgs: ([x]) => [{ positives: positives(x!) }],
    reference: ([x], params) => {
      const w = params.get('weight')!.data;
      return [{ shape: x!.shape, data: x!.data.map((v, i) => v * w[i % w.length]!) }];
    },
    work: () => ({ bytes: 0, flops: 0 }),
  },
);
const runHinted = (cls: new (...a: any[]) => Module) => {
  const baseline = new ModuleRegistry();
  baseline.registerTask(hintedTask);
  const candidate = baseline.child('candidates');
  candidate.override('L1/scale_hinted', cls);
  return benchTask({ task: hintedTask, baseline, candidate, backend: testBackend, iters: 10, warmup: 1 });
};

describe('benchTask: host inputs (TaskBehaviour.hostArgs)', () => {
  it('both sides get the value computed from the inputs, after the tensors, on every call, timed ones too', async () => {
    seenHints.length = 0;
    const rs = await runHinted(HintedCandidate);
    expect(rs.map((r) => r.status)).toEqual(['PASSED', 'PASSED']);
    // a rotation of x (the timed calls' rolled inputs) keeps the count, so every call saw a count of x's positives
    const counts = new Set(seenHints.map((s) => (s.hint as { positives: number } | undefined)?.positives));
    expect(counts.has(undefined)).toBe(false);
    for (const c of counts) expect(c).toBeGreaterThan(0);
    for (const side of ['baseline', 'candidate']) expect(seenHints.filter((s) => s.side === side).length).toBeGreaterThan(2 * 10);
  });

  it('a candidate that rewrites its hint is caught, and the baseline never sees the change', async () => {
    seenHints.length = 0;
    const rs = await runHinted(HintTampering);
    expect(rs.map((r) => r.status)).toEqual(['REWARD_HACK', 'REWARD_HACK']);
    expect(rs[0]!.detail).toMatch(/modified its host argument 'hint'/);
    for (const s of seenHints) expect((s.hint as { positives: number }).positives).toBeGreaterThan(0);
  });

  it('defineTask wants hostArgs exactly with hostInputs; hostArgsFor checks the count', () => {
    const { hostArgs: _h, ...noArgs } = hintedTask;
    expect(() => defineTask({ ...scaleTask, id: 'L1/bad_a', hostInputs: [{ name: 'hint', doc: 'd' }] }, noArgs)).toThrow(/hostInputs and hostArgs go together/);
    expect(() => defineTask({ ...scaleTask, id: 'L1/bad_b' }, { ...noArgs, hostArgs: () => [1] })).toThrow(/hostInputs and hostArgs go together/);
    const twice = defineTask({ ...scaleTask, id: 'L1/bad_c', hostInputs: [{ name: 'hint', doc: 'd' }] }, { ...noArgs, hostArgs: () => [1, 2] });
    expect(() => hostArgsFor(twice, [], twice.cases.ci[0]!)).toThrow(/gave 2 values for 1 host inputs \(hint\)/);
  });
});
