import { F, Module, OpScope, Tensor, defineTask, hostArray, type HostArray } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { DEEPSEEK_V3_ROUTING } from './shapes.js';

export type ScoringFunc = 'softmax' | 'sigmoid';

/**
 * vLLM's grouped_topk (DeepSeek-style group-limited routing; vllm.model_executor.layers.fused_moe.fused_moe.grouped_topk):
 * scores = softmax or sigmoid of the router logits (float32); the experts split into numExpertGroup groups, each group
 * scored by its max (with eScoreCorrectionBias: by the sum of its two largest biased scores); the topkGroup best groups
 * kept; the topk best experts of those (by the biased scores when there is a bias, with weights the unbiased scores);
 * renormalised when asked, then times routedScalingFactor. Ties: the lower index first. forward(hiddenStates,
 * gatingOutput, eScoreCorrectionBias?) -> [topkWeights f32 [T, K], topkIds i32 [T, K]]; hiddenStates only gives T, as in vLLM.
 */
export class GroupedTopK extends Module {
  constructor(
    readonly topk: number,
    readonly renormalize: boolean,
    readonly numExpertGroup: number,
    readonly topkGroup: number,
    readonly scoringFunc: ScoringFunc = 'softmax',
    readonly routedScalingFactor = 1,
  ) {
    super();
    if (topkGroup > numExpertGroup) throw new RangeError(`GroupedTopK: topkGroup ${topkGroup} exceeds numExpertGroup ${numExpertGroup}`);
    if (scoringFunc !== 'softmax' && scoringFunc !== 'sigmoid') throw new RangeError(`GroupedTopK: unsupported scoringFunc '${String(scoringFunc)}'`);
  }

  forward(hiddenStates: Tensor, gatingOutput: Tensor, eScoreCorrectionBias?: Tensor | null): [Tensor, Tensor] {
    const [T, E] = gatingOutput.shape as [number, number];
    if (hiddenStates.shape[0] !== T) throw new RangeError(`GroupedTopK: ${hiddenStates.shape[0]} hidden rows, ${T} gating rows`);
    const G = this.numExpertGroup;
    if (E % G !== 0) throw new RangeError(`GroupedTopK: ${E} experts do not split into ${G} groups`);
    const s = new OpScope();
    try {
      const logits = s.op('to', [gatingOutput], { dtype: 'f32' });
      const scores = this.scoringFunc === 'softmax' ? s.op('softmax', [logits], { dim: -1 }) : s.op('sigmoid', [logits]);
      const biased = eScoreCorrectionBias ? s.op('add', [scores, s.op('to', [eScoreCorrectionBias], { dtype: 'f32' })]) : scores;
      const grouped = biased.view(T, G, E / G);
      s.own(grouped);
      let groupScores: Tensor;
      if (eScoreCorrectionBias) {
        const [top2, top2i] = F.topk(grouped, 2, { dim: -1 });
        s.own(top2!);
        s.own(top2i!);
        groupScores = s.op('sum', [top2!], { dim: -1 });
      } else groupScores = s.op('amax', [grouped], { dim: -1 });
      const [groupTop, groupIdx] = F.topk(groupScores, this.topkGroup, { dim: -1 });
      s.own(groupTop!);
      s.own(groupIdx!);
      const zeros = s.own(Tensor.zeros(this.ctx.backend, [T, G], 'f32', { device: this.ctx.device }));
      const groupMask = s.op('scatter', [zeros, groupIdx!, 1], { dim: 1 });
      const perExpert = s.own(s.own(groupMask.view(T, G, 1)).expand(T, G, E / G));
      const scoreMask = s.own(s.op('contiguous', [perExpert]).view(T, E));
      const masked = s.op('where', [s.op('gt', [scoreMask, 0]), biased, -Infinity]);
      const [topv, ids] = F.topk(masked, this.topk, { dim: -1 });
      s.own(topv!);
      s.own(ids!);
      let weights = eScoreCorrectionBias ? s.op('gather', [scores, ids!], { dim: 1 }) : topv!;
      if (this.renormalize) weights = s.op('div', [weights, s.op('sum', [weights], { dim: -1, keepdim: true })]);
      if (this.routedScalingFactor !== 1) weights = s.op('mul', [weights, this.routedScalingFactor]);
      return s.keep([weights, s.op('to', [ids!], { dtype: 'i32' })]) as unknown as [Tensor, Tensor];
    } catch (e) {
      s.dispose();
      throw e;
    }
  }
}

export interface GroupedTopKOptions {
  readonly topk: number;
  readonly renormalize: boolean;
  readonly numExpertGroup: number;
  readonly topkGroup: number;
  readonly scoringFunc: ScoringFunc;
  readonly routedScalingFactor: number;
}

/** The k best indices of `v` among `allowed` (descending; ties: lower index first). */
function best(v: ArrayLike<number>, k: number, allowed: (i: number) => boolean): number[] {
  const out: number[] = [];
  const taken = new Set<number>();
  for (let j = 0; j < k; j++) {
    let b = -1;
    for (let i = 0; i < v.length; i++) if (allowed(i) && !taken.has(i) && (b < 0 || v[i]! > v[b]!)) b = i;
    taken.add(b);
    out.push(b);
  }
  return out;
}

/** Golden float64 grouped top-k, token by token, straight from the definition above. */
export function groupedTopkReference(logits: HostArray, bias: HostArray | null, o: GroupedTopKOptions): [HostArray, HostArray] {
  const [T, E] = logits.shape as [number, number];
  const G = o.numExpertGroup;
  const per = E / G;
  const weights = hostArray([T, o.topk]);
  const ids = hostArray([T, o.topk]);
  for (let t = 0; t < T; t++) {
    const row = logits.data.subarray(t * E, (t + 1) * E);
    let sc: Float64Array;
    if (o.scoringFunc === 'softmax') {
      const m = Math.max(...row);
      const ex = row.map((x) => Math.exp(x - m));
      const z = ex.reduce((a, b) => a + b, 0);
      sc = ex.map((x) => x / z);
    } else sc = row.map((x) => 1 / (1 + Math.exp(-x)));
    const biased = bias ? sc.map((x, e) => x + bias.data[e]!) : sc;
    const gScore = new Float64Array(G);
    for (let g = 0; g < G; g++) {
      const members = Array.from(biased.subarray(g * per, (g + 1) * per)).sort((a, b) => b - a);
      gScore[g] = bias ? members[0]! + members[1]! : members[0]!;
    }
    const groups = new Set(best(gScore, o.topkGroup, () => true));
    const chosen = best(biased, o.topk, (e) => groups.has(Math.floor(e / per)));
    const w = chosen.map((e) => sc[e]!);
    const sum = w.reduce((a, b) => a + b, 0);
    chosen.forEach((e, j) => {
      ids.data[t * o.topk + j] = e;
      weights.data[t * o.topk + j] = (o.renormalize ? w[j]! / sum : w[j]!) * o.routedScalingFactor;
    });
  }
  return [weights, ids];
}

const optionsOf = (init: readonly unknown[]): GroupedTopKOptions => ({
  topk: init[0] as number,
  renormalize: init[1] as boolean,
  numExpertGroup: init[2] as number,
  topkGroup: init[3] as number,
  scoringFunc: (init[4] as ScoringFunc | undefined) ?? 'softmax',
  routedScalingFactor: (init[5] as number | undefined) ?? 1,
});

const D3 = DEEPSEEK_V3_ROUTING;
const prod = (T: number) => ({ name: `${D3.name}-T${T}`, dtype: 'bf16' as const, dims: { T, H: D3.hidden, E: D3.numExperts, K: D3.topK }, init: [D3.topK, true, D3.numExpertGroup, D3.topkGroup, 'sigmoid', D3.routedScalingFactor], options: { bias: true } });

export const groupedTopkTask = defineTask(
  {
    id: 'L1/grouped_topk',
    level: 1,
    className: 'GroupedTopK',
    family: [DENSE_MOE_LLM],
    architectures: ['deepseek', 'glm', 'kimi_linear', 'qwen3_next'],
    mirrors: 'vllm.model_executor.layers.fused_moe.fused_moe.grouped_topk',
    description: 'Group-limited MoE routing (DeepSeek): softmax / sigmoid scores, best groups, top-k experts within them, optional correction bias, renormalisation and scaling.',
    init: [
      { name: 'topk', type: 'int' },
      { name: 'renormalize', type: 'bool' },
      { name: 'numExpertGroup', type: 'int' },
      { name: 'topkGroup', type: 'int' },
      { name: 'scoringFunc', type: 'enum', choices: ['softmax', 'sigmoid'], optional: true, default: 'softmax' },
      { name: 'routedScalingFactor', type: 'float', optional: true, default: 1 },
    ],
    inputs: [
      { name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'], doc: 'only its row count is read' },
      { name: 'gatingOutput', dtype: 'f32', shape: ['T', 'E'], doc: 'router logits (data-dependent: captured from real runs)' },
      { name: 'eScoreCorrectionBias', dtype: 'f32', shape: ['E'], optional: true },
    ],
    outputs: [
      { name: 'topkWeights', dtype: 'f32', shape: ['T', 'K'] },
      { name: 'topkIds', dtype: 'i32', shape: ['T', 'K'] },
    ],
    cases: {
      ci: [
        { name: 'softmax-4groups-f32', dtype: 'f32', dims: { T: 9, H: 16, E: 32, K: 4 }, init: [4, true, 4, 2] },
        { name: 'sigmoid-bias-scaled-f32', dtype: 'f32', dims: { T: 7, H: 16, E: 64, K: 6 }, init: [6, true, 8, 3, 'sigmoid', 2.5], options: { bias: true } },
        { name: 'softmax-no-renorm-bf16', dtype: 'bf16', dims: { T: 5, H: 32, E: 16, K: 2 }, init: [2, false, 4, 1] },
      ],
      production: [prod(1), prod(32), prod(4096)],
    },
  },
  {
    baseline: GroupedTopK,
    makeInputs: (c, ctx, rng) => [
      randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype),
      randn(ctx, rng, [c.dims.T!, c.dims.E!], 'f32', 2),
      c.options.bias ? randn(ctx, rng, [c.dims.E!], 'f32', 0.1) : null,
    ],
    reference: ([, logits, bias], _p, c) => groupedTopkReference(logits!, bias ?? null, optionsOf(c.init)),
    work: (c) => {
      const { T, E, K } = c.dims as { T: number; E: number; K: number };
      return { bytes: bytesOf([T, E], 4) + bytesOf([E], 4) + T * K * 8, flops: 8 * T * E };
    },
  },
);
