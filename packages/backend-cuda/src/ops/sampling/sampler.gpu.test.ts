import { Rng, Tensor, counterUniform } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G, checkTaskOnCuda, cpu, expectSameInts, gpu, intsCpu, releasing, task, taskCases, toGpu, variant } from '../../../test/spine-helpers.js';

interface Row {
  t: number;
  k: number;
  p: number;
  seed: number;
}

/** Sample on both backends and require the same token in every row. */
function same(logits: Float64Array, B: number, V: number, rows: Row[], label: string): void {
  const l = Tensor.fromArray(cpu(), logits, [B, V], 'f32');
  const t = Tensor.fromArray(cpu(), rows.map((r) => r.t), [B], 'f32');
  const k = intsCpu(rows.map((r) => r.k), [B], 'i32');
  const p = Tensor.fromArray(cpu(), rows.map((r) => r.p), [B], 'f32');
  const s = intsCpu(rows.map((r) => r.seed), [B], 'i64');
  const want = cpu().ops.sample(l, t, k, p, s);
  releasing((keep) => {
    const got = keep(gpu().ops.sample(...keep([l, t, k, p, s].map(toGpu) as [Tensor, Tensor, Tensor, Tensor, Tensor])));
    if (got.dtype !== 'i64' || got.shape.join() !== String(B)) throw new Error(`${label}: got ${got.dtype} ${got.shape}`);
    expectSameInts(got, want, label);
  });
}

function normalLogits(B: number, V: number, seed: number, scale: number): Float64Array {
  return new Rng(seed).fillNormal(B * V, scale).map((x) => Math.fround(x));
}

const KS = (V: number) => [-1, 0, 1, 2, 7, 40, V - 1, V, V + 3];
const PS = [1, 0.95, 0.8, 0.5, 0.1, 0];

function mixedRows(B: number, V: number, seed: number): Row[] {
  const rng = new Rng(seed);
  const ks = KS(V);
  return Array.from({ length: B }, (_, b) => ({
    t: b % 7 === 0 ? 0 : 0.4 + 1.2 * rng.uniform(),
    k: ks[b % ks.length]!,
    p: PS[Math.floor(b / ks.length) % PS.length]!,
    seed: b % 3 === 0 ? -(rng.int(1, 2 ** 40)) : rng.int(0, 2 ** 50),
  }));
}

describe('sample: token for token equal to the CPU backend', () => {
  it('counterUniform reproduces in CUDA: a flat row (all logits equal) samples by the noise alone', G, () => {
    const [B, V] = [32, 4096];
    const rows = Array.from({ length: B }, (_, b) => ({ t: 1, k: 0, p: 1, seed: b * 1000003 - 7 }));
    same(new Float64Array(B * V), B, V, rows, 'flat');
    // the winner is the smallest -ln u, i.e. the largest u
    const s = rows[3]!.seed;
    let best = 0;
    for (let i = 1; i < V; i++) if (counterUniform(s, 0, i) > counterUniform(s, 0, best)) best = i; // row 0: slot-independent noise
    releasing((keep) => {
      const l = keep(Tensor.fromArray(gpu(), new Float64Array(B * V), [B, V], 'f32'));
      const [t, k, p, seeds] = keep([
        Tensor.fromArray(cpu(), rows.map(() => 1), [B], 'f32'),
        intsCpu(rows.map(() => 0), [B], 'i32'),
        Tensor.fromArray(cpu(), rows.map(() => 1), [B], 'f32'),
        intsCpu(rows.map((r) => r.seed), [B], 'i64'),
      ].map(toGpu));
      const out = keep(gpu().ops.sample(l, t!, k!, p!, seeds!));
      if (out.toFloat64Array()[3] !== best) throw new Error(`row 3: ${out.toFloat64Array()[3]} vs ${best}`);
    });
  });

  it('greedy at the Llama vocabulary (B=16, V=128256)', G, () => {
    const [B, V] = [16, 128256];
    same(normalLogits(B, V, 1, 2), B, V, Array.from({ length: B }, () => ({ t: 0, k: 0, p: 1, seed: 0 })), 'greedy');
  });

  for (const [B, V] of [[54, 1000], [54, 257], [27, 64]] as const) {
    it(`mixed temperature / top-k / top-p rows, B=${B} V=${V}${V % 4 ? ' (unaligned rows)' : ''}`, G, () => {
      for (const seed of [1, 2, 3]) same(normalLogits(B, V, seed * 17 + V, 2), B, V, mixedRows(B, V, seed), `mixed seed ${seed}`);
    });
  }

  it('mixed rows at the Llama vocabulary (B=12, V=128256)', G, () => {
    const [B, V] = [12, 128256];
    const rows = [0, 1, 20, 50, 1000, V - 1].flatMap((k) => [{ t: 0.8, k, p: 1, seed: k + 5 }, { t: 1.1, k, p: 0.9, seed: -k - 9 }]);
    same(normalLogits(B, V, 99, 2), B, V, rows, 'llama mixed');
  });

  it('ties (quantized logits): top-k keeps every tie at the threshold; top-p cuts inside a tied group by index', G, () => {
    const [B, V] = [36, 300];
    const rng = new Rng(5);
    const logits = new Float64Array(B * V).map(() => Math.round(rng.normal() * 4) / 4);
    same(logits, B, V, mixedRows(B, V, 5), 'ties');
    // all equal with top-p: the first n by index are kept
    const flat = new Float64Array(4 * 64).fill(0.5);
    same(flat, 4, 64, [{ t: 1, k: 0, p: 0.3, seed: 1 }, { t: 1, k: 10, p: 0.5, seed: 2 }, { t: 2, k: 0, p: 0.01, seed: 3 }, { t: 1, k: 64, p: 1, seed: 4 }], 'flat ties');
  });

  it('NaN, -inf and +inf logits; rows with no finite logit fall back to argmax', G, () => {
    const [B, V] = [10, 128];
    const l = normalLogits(B, V, 7, 2);
    for (let i = 0; i < V; i += 5) l[i] = NaN; // row 0
    for (let i = V; i < 2 * V; i += 3) l[i] = -Infinity; // row 1
    for (let i = 2 * V; i < 3 * V; i++) l[i] = -Infinity; // row 2: all -inf
    for (let i = 3 * V; i < 4 * V; i++) l[i] = NaN; // row 3: all NaN
    l[4 * V + 17] = Infinity; // row 4: +inf
    for (let i = 5 * V; i < 6 * V; i++) l[i] = i % 2 ? NaN : -Infinity; // row 5
    for (let i = 6 * V + 3; i < 7 * V; i++) l[i] = -Infinity; // row 6: 3 finite, top-k larger than that
    const rows: Row[] = [
      { t: 1, k: 10, p: 0.9, seed: 1 },
      { t: 0.7, k: 0, p: 0.8, seed: 2 },
      { t: 1, k: 5, p: 0.5, seed: 3 },
      { t: 1, k: 0, p: 1, seed: 4 },
      { t: 1, k: 0, p: 1, seed: 5 },
      { t: 1, k: 3, p: 1, seed: 6 },
      { t: 1, k: 50, p: 1, seed: 7 },
      { t: 0, k: 0, p: 1, seed: 8 },
      { t: 1.5, k: 2, p: 0.3, seed: 9 },
      { t: 0.01, k: 0, p: 0.999, seed: 10 },
    ];
    same(l, B, V, rows, 'special values');
  });
});

describe('L1/sampler task on CUDA vs its float64 reference (token for token)', () => {
  const t = task('L1/sampler');
  const b = t.cases.ci[1]!;
  const extra = [
    variant(b, 'mixed-V1001', { dims: { B: 20, V: 1001 }, options: { mode: 'mixed' } }),
    variant(b, 'mixed-llama-vocab', { dims: { B: 6, V: 128256 }, options: { mode: 'mixed' } }),
    variant(b, 'greedy-odd', { dims: { B: 9, V: 333 }, options: { mode: 'greedy' } }),
  ];
  for (const { c, seed } of taskCases(t, extra)) it(`${c.name} seed ${seed}`, G, () => checkTaskOnCuda(t, c, seed));
  // the kernels bench's cases (B32 mixed with its hint: the multi-CTA path; B64 greedy), token for token
  for (const c of t.cases.production) it(`production ${c.name} seed 14`, { ...G, timeout: 120_000 }, () => checkTaskOnCuda(t, c, 14));
});
