import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, TaskCaseSchema, compareTensors, counterUniform, hostArgsFor, hostArray, toHostArray, toleranceFor, withContext, type ExecutionContext, type HostArray, type Module, type TaskCase, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { baselineRegistry } from '../../../index.js';
import { Sampler, sampleReference, samplerTask } from './sampler.js';

const task = samplerTask;
const backend = new CpuBackend();
const registry = baselineRegistry();
const ctxFor = (c: TaskCase): ExecutionContext => ({ backend, device: 0, dtype: c.dtype, registry });

/** Sample a single-row batch with the reference. */
function draw(logits: number[], t: number, k: number, p: number, seed: number): number {
  const V = logits.length;
  const out = sampleReference(hostArray([1, V], logits), hostArray([1], [t]), hostArray([1], [k]), hostArray([1], [p]), hostArray([1], [seed]));
  return out.data[0]!;
}

/** Token frequencies over seeds 0..n-1. */
function frequencies(logits: number[], t: number, k: number, p: number, n: number): number[] {
  const counts = new Array<number>(logits.length).fill(0);
  for (let s = 0; s < n; s++) counts[draw(logits, t, k, p, s * 7919 + 1)]!++;
  return counts.map((x) => x / n);
}

const softmax = (x: number[]) => {
  const m = Math.max(...x);
  const e = x.map((v) => Math.exp(v - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
};

describe('sampleReference (by hand)', () => {
  it('greedy rows (temperature 0) take the argmax, the first index on a tie, whatever top-k/top-p/seed say', () => {
    const logits = hostArray([3, 4], [0.1, 3, -1, 3, -5, -4, -6, -4.5, 2, 2, 2, 2]);
    const zeros = hostArray([3], [0, 0, 0]);
    const out = sampleReference(logits, zeros, hostArray([3], [1, 2, 0]), hostArray([3], [0.1, 1, 0.5]), hostArray([3], [1, 2, 3]));
    expect([...out.data]).toEqual([1, 1, 0]);
  });

  it('greedy ignores NaN logits', () => {
    expect(draw([NaN, 1, 4, NaN], 0, 0, 1, 0)).toBe(2);
  });

  it('draws argmax_i p_i / E_i with E_i = -ln counterUniform(seed, 0, i) in every row (worked by hand for V = 3)', () => {
    // p = [1/6, 2/6, 3/6] from logits ln 1, ln 2, ln 3; both rows of a 2-row batch draw row-0 noise (slot-independent)
    const logits = [0, Math.log(2), Math.log(3)];
    const p = [1 / 6, 2 / 6, 3 / 6];
    for (const seed of [0, 1, 42, 2 ** 33 + 5]) {
      for (const row of [0, 1]) {
        const scores = p.map((pi, i) => pi / -Math.log(counterUniform(seed, 0, i)));
        const expected = scores.indexOf(Math.max(...scores));
        const batch = sampleReference(
          hostArray([2, 3], [...logits, ...logits]),
          hostArray([2], [1, 1]),
          hostArray([2], [0, 0]),
          hostArray([2], [1, 1]),
          hostArray([2], [seed, seed]),
        );
        expect(batch.data[row], `seed ${seed} row ${row}`).toBe(expected);
      }
    }
  });

  it('temperature divides the logits: logits 2x at temperature 2 draw exactly like logits at temperature 1', () => {
    const base = [0.3, -1.2, 2.0, 0.7, 0.0];
    for (let s = 0; s < 200; s++) expect(draw(base.map((x) => 2 * x), 2, 0, 1, s)).toBe(draw(base, 1, 0, 1, s));
  });

  it('top-k = 1 always returns the argmax; top-k = 2 only ever the two largest (and both)', () => {
    const logits = [0.5, 2.5, -1, 2.0, 1.9];
    const seen = new Set<number>();
    for (let s = 0; s < 300; s++) {
      expect(draw(logits, 1.3, 1, 1, s)).toBe(1);
      seen.add(draw(logits, 1.3, 2, 1, s));
    }
    expect([...seen].sort()).toEqual([1, 3]);
  });

  it('top-k keeps every logit tied with the k-th largest; k <= 0 or k >= V is off', () => {
    const seen = new Set<number>();
    for (let s = 0; s < 300; s++) seen.add(draw([1, 3, 2, 2, 0], 1, 2, 1, s));
    expect([...seen].sort()).toEqual([1, 2, 3]);
    for (const k of [0, -1, 5, 9]) {
      const all = new Set<number>();
      for (let s = 0; s < 400; s++) all.add(draw([0, 0.2, 0.1, 0.3, 0], 1, k, 1, s));
      expect(all.size, `k = ${k}`).toBe(5);
    }
  });

  it('top-p keeps the shortest most-probable prefix reaching p: probs 0.5, 0.3, 0.15, 0.05', () => {
    const logits = [0.05, 0.3, 0.5, 0.15].map(Math.log); // token 2 most likely, then 1, 3, 0
    const kept = (p: number) => {
      const s = new Set<number>();
      for (let seed = 0; seed < 600; seed++) s.add(draw(logits, 1, 0, p, seed));
      return [...s].sort();
    };
    expect(kept(0.45)).toEqual([2]); // 0.5 >= 0.45
    expect(kept(0.7)).toEqual([1, 2]); // 0.5 < 0.7 <= 0.8
    expect(kept(0.9)).toEqual([1, 2, 3]); // 0.8 < 0.9 <= 0.95
    expect(kept(0.97)).toEqual([0, 1, 2, 3]);
    expect(kept(1)).toEqual([0, 1, 2, 3]);
  });

  it('top-p applies after top-k, on the renormalised top-k probabilities', () => {
    // top-k 3 leaves 0.5, 0.3, 0.15, renormalised 0.526, 0.316, 0.158: with p = 0.84 the first two
    // reach 0.842 and suffice; without top-k they reach only 0.8, so token 3 (0.15) is needed as well.
    const logits = [0.05, 0.3, 0.5, 0.15].map(Math.log);
    const s = new Set<number>();
    for (let seed = 0; seed < 600; seed++) s.add(draw(logits, 1, 3, 0.84, seed));
    expect([...s].sort()).toEqual([1, 2]); // 0.842 >= 0.84; without top-k 0.8 < 0.84 would keep token 3 too
    const t = new Set<number>();
    for (let seed = 0; seed < 600; seed++) t.add(draw(logits, 1, 0, 0.84, seed));
    expect([...t].sort()).toEqual([1, 2, 3]);
  });

  it('a row with no finite logit falls back to greedy', () => {
    expect(draw([-Infinity, -Infinity, -Infinity], 1, 0, 1, 3)).toBe(0);
  });
});

describe('sampleReference statistics: frequencies over many seeds approximate the distribution', () => {
  const N = 20000; // standard error <= 0.0036 per token; bound 0.015 is > 4 sigma
  it('temperature 0.8 over 5 tokens ~ softmax(logits / 0.8)', () => {
    const logits = [1, 0.5, -1, 2, 0];
    const f = frequencies(logits, 0.8, 0, 1, N);
    softmax(logits.map((x) => x / 0.8)).forEach((p, i) => expect(Math.abs(f[i]! - p), `token ${i}: ${f[i]} vs ${p}`).toBeLessThan(0.015));
  });

  it('top-k 3 + top-p: frequencies ~ the renormalised kept probabilities, zero elsewhere', () => {
    const logits = [1, 0.5, -1, 2, 0];
    // top-3 at T = 1: tokens 3, 0, 1 with softmax [0.629, 0.231, 0.140]; p = 0.8 keeps tokens 3 and 0 (0.86)
    const f = frequencies(logits, 1, 3, 0.8, N);
    const kept = softmax([2, 1]);
    expect(Math.abs(f[3]! - kept[0]!)).toBeLessThan(0.015);
    expect(Math.abs(f[0]! - kept[1]!)).toBeLessThan(0.015);
    expect(f[1]! + f[2]! + f[4]!).toBe(0);
  });
});

describe('sampler metadata and inputs', () => {
  it('is registered with the Sampler baseline and exact integer tolerance', () => {
    expect(registry.resolve('L1/sampler')).toBe(Sampler);
    expect(toleranceFor(task, 'i64')).toEqual({ atol: 0, rtol: 0 });
  });

  it('makeInputs: mixed mode covers greedy, temperature, top-k, top-p and both; seeds use both halves', () => {
    const c = task.cases.ci.find((x) => x.name === 'mixed')!;
    const [logits, temperature, topK, topP, seeds] = task.makeInputs(c, ctxFor(c), new Rng(4)) as Tensor[];
    expect([logits!.dtype, temperature!.dtype, topK!.dtype, topP!.dtype, seeds!.dtype]).toEqual(['f32', 'f32', 'i32', 'f32', 'i64']);
    const T = [...temperature!.toFloat64Array()];
    const K = [...topK!.toFloat64Array()];
    const P = [...topP!.toFloat64Array()];
    expect(T.filter((t) => t === 0).length).toBe(2);
    expect(T.filter((t) => t > 0).every((t) => t >= 0.5 && t <= 1.5)).toBe(true);
    expect(K.some((k) => k > 0) && P.some((p) => p < 1)).toBe(true);
    expect(K.some((k, i) => k > 0 && P[i]! < 1)).toBe(true);
    expect(K.every((k) => k < c.dims.V!)).toBe(true);
    expect([...seeds!.toFloat64Array()].some((s) => s >= 2 ** 32)).toBe(true);
    const greedy = task.cases.ci.find((x) => x.name === 'all-greedy')!;
    expect([...(task.makeInputs(greedy, ctxFor(greedy), new Rng(4))[1] as Tensor).toFloat64Array()].every((t) => t === 0)).toBe(true);
  });

  it("hostArgs: the hint counts the rows with temperature > 0 (vLLM's SamplingMetadata), for every case", () => {
    expect(task.hostInputs.map((h) => h.name)).toEqual(['hint']);
    for (const c of [...task.cases.ci, ...task.cases.production.map((p) => ({ ...p, dims: { ...p.dims, V: 64 } as Record<string, number> }))]) {
      const inputs = task.makeInputs(c, ctxFor(c), new Rng(9));
      const drawing = [...(inputs[1] as Tensor).toFloat64Array()].filter((t) => t > 0).length;
      expect(hostArgsFor(task, inputs, c), c.name).toEqual([{ sampledRows: drawing }]);
      expect(drawing).toBe(c.options.mode === 'greedy' ? 0 : c.dims.B! - Math.ceil(c.dims.B! / 5)); // mixed: every fifth row greedy
      for (const t of inputs) t?.dispose();
    }
  });

  it('work: logits once, 7 flops per logit of the sampled rows', () => {
    const c = TaskCaseSchema.parse({ name: 'w', dtype: 'f32', dims: { B: 10, V: 100 }, init: [], options: { mode: 'mixed' } });
    expect(task.work(c)).toEqual({ bytes: 4000 + 10 * 20 + 80, flops: 7 * 8 * 100 });
    const g = TaskCaseSchema.parse({ ...c, options: { mode: 'greedy' } });
    expect(task.work(g).flops).toBe(0);
  });
});

function runCase(c: TaskCase, seed: number): { out: Tensor; expected: HostArray; inputs: (Tensor | null)[] } {
  const ctx = ctxFor(c);
  const module = registry.createIn<Module>(ctx, task.id, ...c.init);
  const inputs = withContext(ctx, () => task.makeInputs(c, ctx, new Rng(seed)));
  const host = inputs.map((t) => (t ? toHostArray(t) : null));
  const out = (module as Sampler).forward(...(inputs as [Tensor, Tensor, Tensor, Tensor, Tensor]));
  return { out, expected: task.reference(host, new Map(), c)[0]!, inputs };
}

describe('sampler end to end on the CPU backend', () => {
  for (const c of task.cases.ci) {
    it(`${c.name} draws exactly the reference's tokens for fresh seeds`, () => {
      for (const seed of [41, 42, 43, 44, 45]) {
        const { out, expected, inputs } = runCase(c, seed);
        expect([...out.shape]).toEqual([c.dims.B]);
        expect(out.dtype).toBe('i64');
        const cmp = compareTensors(out, expected, toleranceFor(task, out.dtype));
        expect(cmp.status, `${c.name} seed ${seed}: ${cmp.detail ?? ''}`).toBe('PASSED');
        expect([...out.toFloat64Array()]).toEqual([...expected.data]);
        for (const t of [...inputs, out]) t?.dispose();
      }
    });
  }

  it('production vocabulary (B = 32, V = 128256, mixed) draws the same tokens', () => {
    const c = task.cases.production.find((x) => x.name === 'llama3-8b-b32-mixed')!;
    const { out, expected, inputs } = runCase(c, 7);
    expect([...out.toFloat64Array()]).toEqual([...expected.data]);
    for (const t of [...inputs, out]) t?.dispose();
  });
});
