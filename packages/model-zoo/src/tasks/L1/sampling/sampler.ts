import { Module, Tensor, counterUniform, defineTask, normalTensor, hostArray, toHostArray, type HostArray, type SampleHint, type TaskCase } from '@fastkernels/core';
import { bytesOf, fromInts } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';

/**
 * vLLM V1's Sampler (greedy, temperature, top-k, top-p; seeded): one token per row of logits.
 * Greedy rows (temperature 0) take the argmax; the others divide by the temperature, keep the
 * top-k logits, then the top-p nucleus, and draw by the exponential race argmax(p / E),
 * E = -log u with u = counterUniform(seed, 0, col): the row index is not mixed in, so a request draws the same tokens in any batch slot.
 */
export class Sampler extends Module {
  constructor() {
    super();
  }

  /**
   * `hint` (the task's host input): what the caller knows on the host about the batch — vLLM's SamplingMetadata
   * all_greedy / all_random, here the number of rows with temperature > 0. It lets a backend pick a launch strategy
   * without a device sync (CUDA: one CTA per row vs split rows); the tokens do not depend on it.
   */
  forward(logits: Tensor, temperature: Tensor, topK: Tensor, topP: Tensor, seeds: Tensor, hint?: SampleHint): Tensor {
    return this.ctx.backend.ops.sample(logits, temperature, topK, topP, seeds, hint);
  }
}

/**
 * Golden sampler on host arrays, one row at a time in float64 (the algorithm every backend draws by):
 * 1. temperature == 0: the first index of the largest logit (NaN ignored).
 * 2. s = logits / temperature.
 * 3. top-k (0 < k < V): keep s_i >= the k-th largest s (ties at the threshold all kept).
 * 4. top-p (p < 1): q = softmax of the kept s; walk the kept tokens by q descending (ties: lower
 *    index first) and keep the shortest prefix whose running sum reaches >= p (at least one token).
 * 5. pi = softmax of the kept s; token = argmax over kept i of pi_i / E_i, E_i = -ln counterUniform(seed, 0, i)
 *    (first index on a tie). A row with no finite kept logit falls back to 1.
 */
export function sampleReference(logits: HostArray, temperature: HostArray, topK: HostArray, topP: HostArray, seeds: HostArray): HostArray {
  const [B, V] = logits.shape as [number, number];
  const out = hostArray([B]);
  for (let b = 0; b < B; b++) {
    const row = logits.data.subarray(b * V, (b + 1) * V);
    const t = temperature.data[b]!;
    out.data[b] = t === 0 ? greedy(row) : (drawRow(row, t, topK.data[b]!, topP.data[b]!, seeds.data[b]!, b) ?? greedy(row));
  }
  return out;
}

/** First index of the largest non-NaN value (0 when there is none). */
function greedy(row: ArrayLike<number>): number {
  let best = -1;
  for (let i = 0; i < row.length; i++) {
    if (Number.isNaN(row[i]!)) continue;
    if (best < 0 || row[i]! > row[best]!) best = i;
  }
  return Math.max(best, 0);
}

/** Steps 2-5 for one row; null when no finite logit survives. */
function drawRow(row: Float64Array, t: number, k: number, p: number, seed: number, b: number): number | null {
  const V = row.length;
  const s = Float64Array.from(row, (v) => v / t);
  const keep = new Uint8Array(V);
  for (let i = 0; i < V; i++) keep[i] = Number.isNaN(s[i]!) || s[i] === -Infinity ? 0 : 1;

  if (k > 0 && k < V) {
    const asc = Float64Array.from(s.filter((v) => !Number.isNaN(v))).sort(); // typed sort: numeric ascending
    const threshold = asc[asc.length - k] ?? -Infinity; // the k-th largest
    for (let i = 0; i < V; i++) if (!(s[i]! >= threshold)) keep[i] = 0;
  }
  if (!keep.some((x) => x === 1)) return null;

  if (p < 1) {
    const q = softmaxKept(s, keep);
    const kept = [...Array(V).keys()].filter((i) => keep[i]);
    kept.sort((i, j) => q[j]! - q[i]! || i - j); // descending probability, lower index first
    let cum = 0;
    let n = 0;
    while (n < kept.length && (n === 0 || cum < p)) cum += q[kept[n++]!]!;
    for (let m = n; m < kept.length; m++) keep[kept[m]!] = 0;
  }

  const pi = softmaxKept(s, keep);
  let best = -1;
  let bestScore = -Infinity;
  for (let i = 0; i < V; i++) {
    if (!keep[i]) continue;
    const score = pi[i]! / -Math.log(counterUniform(seed, 0, i)); // row 0: slot-independent
    if (score > bestScore) {
      bestScore = score;
      best = i;
    }
  }
  return best;
}

/** Softmax of x over the kept entries (0 elsewhere). */
function softmaxKept(x: Float64Array, keep: Uint8Array): Float64Array {
  let max = -Infinity;
  for (let i = 0; i < x.length; i++) if (keep[i] && x[i]! > max) max = x[i]!;
  const p = new Float64Array(x.length);
  let sum = 0;
  for (let i = 0; i < x.length; i++) {
    if (!keep[i]) continue;
    p[i] = Math.exp(x[i]! - max);
    sum += p[i]!;
  }
  for (let i = 0; i < x.length; i++) p[i]! /= sum;
  return p;
}

/** Row kinds: 0 greedy, 1 temperature only, 2 top-k, 3 top-p, 4 top-k + top-p. */
type RowKind = 0 | 1 | 2 | 3 | 4;

function rowKinds(c: TaskCase): RowKind[] {
  const mode = (c.options.mode as string | undefined) ?? 'mixed';
  const B = c.dims.B!;
  if (mode === 'greedy') return new Array<RowKind>(B).fill(0);
  if (mode === 'mixed') return Array.from({ length: B }, (_, i) => (i % 5) as RowKind);
  throw new Error(`sampler: case '${c.name}' has unknown options.mode '${mode}' (greedy | mixed)`);
}

export const samplerTask = defineTask(
  {
    id: 'L1/sampler',
    level: 1,
    className: 'Sampler',
    family: [DENSE_MOE_LLM],
    architectures: ['llama', 'qwen2', 'mistral'],
    mirrors: 'vllm.v1.sample.sampler.Sampler',
    description:
      'Token sampling from final logits: greedy rows take the argmax; others apply temperature, top-k, top-p, then draw with per-request seeded noise (exponential race over counterUniform).',
    init: [],
    inputs: [
      { name: 'logits', dtype: 'f32', shape: ['B', 'V'] },
      { name: 'temperature', dtype: 'f32', shape: ['B'], doc: '0 = greedy' },
      { name: 'topK', dtype: 'i32', shape: ['B'], doc: '<= 0 or >= V = off' },
      { name: 'topP', dtype: 'f32', shape: ['B'], doc: '1 = off' },
      { name: 'seeds', dtype: 'i64', shape: ['B'] },
    ],
    hostInputs: [
      {
        name: 'hint',
        doc: "{ sampledRows }: the rows with temperature > 0, as vLLM's SamplingMetadata (all_greedy / all_random) tells its sampler on the host",
      },
    ],
    outputs: [{ name: 'tokens', dtype: 'i64', shape: ['B'] }],
    cases: {
      ci: [
        { name: 'all-greedy', dtype: 'f32', dims: { B: 6, V: 100 }, init: [], options: { mode: 'greedy' } },
        { name: 'mixed', dtype: 'f32', dims: { B: 10, V: 257 }, init: [], options: { mode: 'mixed' } },
        { name: 'mixed-flat-logits', dtype: 'f32', dims: { B: 15, V: 64 }, init: [], options: { mode: 'mixed', logitScale: 0.5 } },
      ],
      production: [
        { name: 'llama3-8b-b32-mixed', dtype: 'f32', dims: { B: 32, V: 128256 }, init: [], options: { mode: 'mixed' } },
        { name: 'llama3-8b-b64-greedy', dtype: 'f32', dims: { B: 64, V: 128256 }, init: [], options: { mode: 'greedy' } },
      ],
    },
  },
  {
    baseline: Sampler,
    makeInputs: (c, ctx, rng) => {
      const { B, V } = c.dims as { B: number; V: number };
      const scale = (c.options.logitScale as number | undefined) ?? 2;
      const kinds = rowKinds(c);
      const order = rng.permutation(B); // which rows get which kind
      const temperature: number[] = [];
      const topK: number[] = [];
      const topP: number[] = [];
      const seeds: number[] = [];
      for (let r = 0; r < B; r++) {
        const kind = kinds[order[r]!]!;
        temperature.push(kind === 0 ? 0 : 0.5 + rng.uniform());
        topK.push(kind === 2 ? rng.int(1, Math.min(20, V - 1) + 1) : kind === 4 ? rng.int(2, Math.min(40, V - 1) + 1) : kind === 1 ? -1 : 0);
        topP.push(kind === 3 ? 0.5 + 0.45 * rng.uniform() : kind === 4 ? 0.6 + 0.35 * rng.uniform() : 1);
        seeds.push(rng.int(0, 2 ** 40)); // both 32-bit halves of the seed in play
      }
      return [
        normalTensor(ctx.backend, [B, V], 'f32', rng, { scale, device: ctx.device }),
        Tensor.fromArray(ctx.backend, temperature, [B], 'f32', { device: ctx.device }),
        fromInts(ctx, topK, [B], 'i32'),
        Tensor.fromArray(ctx.backend, topP, [B], 'f32', { device: ctx.device }),
        fromInts(ctx, seeds, [B], 'i64'),
      ];
    },
    // the host knows which rows draw (vLLM builds SamplingMetadata from the requests), so the module gets it: read from
    // the temperatures themselves (a rotation of them keeps the count)
    hostArgs: ([, temperature]): [SampleHint] => [{ sampledRows: toHostArray(temperature!).data.filter((t) => t > 0).length }],
    reference: ([logits, temperature, topK, topP, seeds]) => [sampleReference(logits!, temperature!, topK!, topP!, seeds!)],
    work: (c) => {
      const { B, V } = c.dims as { B: number; V: number };
      const randomRows = rowKinds(c).filter((k) => k !== 0).length;
      return {
        // logits read once; per-row parameters in, one token id out
        bytes: bytesOf([B, V], 4) + B * (4 + 4 + 4 + 8) + bytesOf([B], 8),
        // random rows, per logit: scale, max-subtract, exp, sum, normalise, -log(u), divide (sorts and compares not counted)
        flops: 7 * randomRows * V,
      };
    },
  },
);
