/**
 * From a module tree to the checkpoint tensors that fill it. The tree names its parameters as production does
 * (`model.layers.0.self_attn.qkv_proj.weight`); a family declares only where its checkpoints differ (WeightRules):
 * stacked parameters (vLLM's stacked_params_mapping: qkv_proj from q/k/v_proj, gate_up_proj from gate/up_proj, an
 * expert tensor from per-expert gate/up), renames, tied tensors, and how each parameter splits over tensor-parallel
 * ranks. planWeights turns that into one WeightMapping per checkpoint tensor and destination; loading, random init and
 * checkpoint writing all walk that one plan.
 */
import {
  currentTensorParallelGroup,
  mergedColumnPartPiece,
  numel,
  qkvLayout,
  qkvPartPiece,
  rowParallelSlice,
  columnParallelSlice,
  vocabParallelSlice,
  DTYPE_INFO,
  type DType,
  type Module,
  type ShardSlice,
  type Tensor,
} from '@fastkernels/core';
import type { TensorDraw } from './init-scale.js';
import { currentExpertParallel, expertParallelRange } from '../layers/parallel/expert-parallel.js';

/** How random init draws a tensor: matrices and biases N(0, std^2), norm weights 1 + N(0, std^2). */
export type TensorKind = 'matrix' | 'norm' | 'bias';

/**
 * One checkpoint tensor and where it goes: rows [rowOffset, rowOffset + rows) of the parameter `target` (rows counted
 * over the parameter's leading dims, so an expert tensor [E, 2I, H] takes [I, H] pieces), where rows is shape[0], or
 * the slice's length when the slice is along dim 0.
 */
export interface WeightMapping {
  /** The checkpoint name (HF / diffusers naming). */
  readonly hfName: string;
  /** The tensor's full shape in the checkpoint. */
  readonly shape: readonly number[];
  readonly target: string;
  readonly rowOffset: number;
  readonly kind: TensorKind;
  /** Under tensor parallelism, the part of the tensor this rank holds (the whole tensor when absent). */
  readonly slice?: ShardSlice;
  /**
   * Set for a parameter that is not a float (MXFP4 blocks / scales, u8): the checkpoint stores the tensor in this dtype,
   * read and written bit-exact (float tensors are converted to the model's dtype).
   */
  readonly dtype?: DType;
}

/** This process's place in a tensor-parallel group (the whole model at world 1). */
export interface TensorParallelRank {
  readonly rank: number;
  readonly world: number;
}

/** The shape of the values a mapping writes: the full shape, or the slice's. */
export function mappedShape(m: Pick<WeightMapping, 'shape' | 'slice'>): number[] {
  const shape = [...m.shape];
  if (m.slice) shape[m.slice.dim] = m.slice.length;
  return shape;
}

/** Rows of a part of a stacked parameter, and how a rank cuts them (the layer that owns the parameter decides). */
export type StackedLayout =
  /** QKVParallelLinear: parts q, k, v of numHeads / numKvHeads heads; kv heads replicated when fewer than ranks. */
  | { readonly kind: 'qkv'; readonly headSize: number; readonly numHeads: number; readonly numKvHeads: number }
  /** MergedColumnParallelLinear: parts of `sizes` rows, each split over the ranks. */
  | { readonly kind: 'merged'; readonly sizes: readonly number[] }
  /**
   * A fused expert tensor [numExperts, sum(sizes), ...] (vLLM's FusedMoE w13_weight) from per-expert parts: the part
   * segment becomes `<expert>.<part>` (experts.w13_weight <- experts.3.gate_proj.weight). Whole on every rank at
   * world 1; under expert parallelism each rank reads its own experts only (layers/parallel/expert-parallel.ts).
   */
  | { readonly kind: 'experts'; readonly numExperts: number; readonly sizes: readonly number[] };

/** A parameter the checkpoint stores as separate tensors stacked along its rows. */
export interface StackedRule {
  /** The parameter's name segment (qkv_proj, gate_up_proj, w13_weight). */
  readonly param: string;
  /** The checkpoint's segments in row order (q_proj, k_proj, v_proj). */
  readonly parts: readonly string[];
  readonly layout: StackedLayout;
}

/**
 * How a (non-stacked) parameter splits over ranks: 'column' rows (ColumnParallelLinear), 'row' columns
 * (RowParallelLinear's weight), 'vocab' rows of a [size, H] table when `size` divides by the world (else whole).
 * Parameters no rule matches are whole on every rank.
 */
export type ShardRule = { readonly match: RegExp } & ({ readonly kind: 'column' | 'row' } | { readonly kind: 'vocab'; readonly size: number });

export interface WeightRules {
  /** What the tensors come from, in errors: "the qwen2 config". */
  readonly label: string;
  readonly stacked?: readonly StackedRule[];
  /** Parameter name -> checkpoint name rewrites where production renames (applied in order, after stacking). */
  readonly renames?: readonly { readonly from: RegExp; readonly to: string }[];
  /** Checkpoint names read from another checkpoint tensor (tied embeddings: lm_head.weight <- model.embed_tokens.weight). */
  readonly tied?: Readonly<Record<string, string>>;
  readonly sharded?: readonly ShardRule[];
  /** Checkpoint tensors the model does not use and that are fine to find (rotary inv_freq). */
  readonly ignore?: readonly RegExp[];
  /** Parameters computed at build (rotary cos/sin caches), not loaded. */
  readonly computed?: readonly RegExp[];
  /** Checkpoint names drawn as norm weights (1 + noise) by random init. */
  readonly norms?: RegExp;
  /** The std of random init (HF's initializer_range). */
  readonly initStd: number;
  /**
   * A family's own random draw for some tensors, before the std / fan-in rules (gpt-oss's MXFP4 tensors: blocks are
   * random bytes, scales the exponent that gives the dense weights' std); undefined: the rules' draw.
   */
  readonly draws?: (m: Pick<WeightMapping, 'hfName' | 'shape' | 'kind'>) => TensorDraw | undefined;
  /**
   * Per-fan-in random init instead of one std (init-scale.ts): conv / linear weights N(0, (gain / sqrt(fan_in))^2),
   * norms and BatchNorm statistics as a fresh torch model. Conv nets use it (vision families).
   */
  readonly init?: { readonly mode: 'fan-in'; readonly gain: number };
  /** A fix for a missing tensor, when the family knows a likely cause. */
  readonly missingFix?: (hfName: string) => string | undefined;
  /** A fix for unexpected tensors. */
  readonly unexpectedFix?: string;
}

/** The parameters a checkpoint fills: every named parameter but the computed ones. */
export function loadableParameters(model: Module, rules: Pick<WeightRules, 'computed'>): Map<string, Tensor> {
  const computed = rules.computed ?? [];
  return new Map(model.namedParameters().filter(([k]) => !computed.some((r) => r.test(k))));
}

/**
 * The plan of a module tree: for each loadable parameter (in the tree's order), the checkpoint tensor(s) that fill it,
 * each with its full checkpoint shape and, under tensor parallelism, the slice this rank reads. `shapes`: the tree is
 * this rank's shard ('rank', the one being loaded) or the whole model built at world 1 ('full': planning a rank's reads
 * without building its tensor-parallel layers).
 */
export function planWeights(model: Module, rules: WeightRules, tp: TensorParallelRank = currentTensorParallelGroup(), shapes: 'rank' | 'full' = 'rank'): WeightMapping[] {
  const out: WeightMapping[] = [];
  // A tensor is drawn by its own (renamed) name's kind; it is read from the tensor it is tied to, if any.
  const locate = (name: string, shape: readonly number[]): Pick<WeightMapping, 'hfName' | 'kind'> => {
    for (const r of rules.renames ?? []) name = name.replace(r.from, r.to);
    const kind: TensorKind = rules.norms?.test(name) ? 'norm' : shape.length >= 2 ? 'matrix' : 'bias';
    return { hfName: rules.tied?.[name] ?? name, kind };
  };
  for (const [target, param] of loadableParameters(model, rules)) {
    const segs = target.split('.');
    const stacked = rules.stacked?.find((s) => segs.includes(s.param));
    if (stacked) {
      out.push(...stackedMappings(target, param.shape, segs, stacked, tp, locate));
      continue;
    }
    const { shape, slice } = shardOf(target, param.shape, rules.sharded ?? [], tp, shapes === 'full');
    out.push({ ...locate(target, shape), shape, target, rowOffset: 0, ...(slice ? { slice } : {}), ...(DTYPE_INFO[param.dtype].kind !== 'float' ? { dtype: param.dtype } : {}) });
  }
  return out;
}

/** A parameter's full checkpoint shape (from the rank's shard, or as is) and the slice the rank reads. */
function shardOf(target: string, paramShape: readonly number[], rules: readonly ShardRule[], tp: TensorParallelRank, full: boolean): { shape: number[]; slice?: ShardSlice } {
  const shape = [...paramShape];
  const rule = tp.world > 1 ? rules.find((r) => r.match.test(target)) : undefined;
  if (!rule) return { shape };
  if (rule.kind === 'vocab') {
    shape[0] = rule.size;
    return rule.size % tp.world === 0 ? { shape, slice: vocabParallelSlice(rule.size, tp.rank, tp.world) } : { shape };
  }
  const dim = rule.kind === 'column' ? 0 : 1;
  if (dim === 1 && paramShape.length !== 2) return { shape }; // a row-parallel bias is replicated
  if (!full) shape[dim] = paramShape[dim]! * tp.world;
  return { shape, slice: dim === 0 ? columnParallelSlice(shape[0]!, tp.rank, tp.world) : rowParallelSlice(shape[1]!, tp.rank, tp.world) };
}

function stackedMappings(
  target: string,
  paramShape: readonly number[],
  segs: readonly string[],
  rule: StackedRule,
  tp: TensorParallelRank,
  locate: (name: string, shape: readonly number[]) => Pick<WeightMapping, 'hfName' | 'kind'>,
): WeightMapping[] {
  const at = segs.indexOf(rule.param);
  const nameOf = (part: string) => [...segs.slice(0, at), part, ...segs.slice(at + 1)].join('.');
  const { layout } = rule;
  const out: WeightMapping[] = [];
  const push = (part: string, shape: number[], rowOffset: number, slice?: ShardSlice) => {
    out.push({ ...locate(nameOf(part), shape), shape, target, rowOffset, ...(slice ? { slice } : {}) });
  };
  if (layout.kind === 'experts') {
    // expert parallelism: the rank reads its own experts' tensors only, stacked from row 0 of its shard
    if (tp.world > 1 && !currentExpertParallel()) throw new Error(`${target}: expert tensors are split over ranks only by expert parallelism (--ep)`);
    const { start, count } = tp.world > 1 ? expertParallelRange(layout.numExperts, tp.rank, tp.world) : { start: 0, count: layout.numExperts };
    const per = layout.sizes.reduce((a, b) => a + b, 0);
    const inner = paramShape.slice(2);
    for (let e = start; e < start + count; e++) {
      let off = 0;
      rule.parts.forEach((p, i) => {
        push(`${e}.${p}`, [layout.sizes[i]!, ...inner], (e - start) * per + off);
        off += layout.sizes[i]!;
      });
    }
    return out;
  }
  const inner = paramShape.slice(1);
  const sizes = layout.kind === 'qkv' ? [layout.numHeads, layout.numKvHeads, layout.numKvHeads].map((h) => h * layout.headSize) : layout.sizes;
  if (sizes.length !== rule.parts.length) throw new Error(`${target}: ${rule.parts.length} stacked parts, ${sizes.length} sizes`);
  const heads = layout.kind === 'qkv' && tp.world > 1 ? qkvLayout(layout.headSize, layout.numHeads, layout.numKvHeads, tp.world) : null;
  let w1Offset = 0;
  rule.parts.forEach((p, i) => {
    const shape = [sizes[i]!, ...inner];
    if (tp.world === 1) push(p, shape, w1Offset);
    else {
      const piece = heads ? qkvPartPiece(heads, (['q', 'k', 'v'] as const)[i]!, tp.rank) : mergedColumnPartPiece(sizes, i, tp.rank, tp.world);
      push(p, shape, piece.rowOffset, { dim: piece.dim, start: piece.start, length: piece.length });
    }
    w1Offset += sizes[i]!;
  });
  return out;
}

/** Unique checkpoint tensors of a plan (a tied embedding appears once), in plan order. */
export function uniqueTensors(plan: readonly WeightMapping[]): WeightMapping[] {
  const seen = new Set<string>();
  return plan.filter((m) => (seen.has(m.hfName) ? false : (seen.add(m.hfName), true)));
}

/** Elements per row of a mapping's values (1 for a vector): rows are counted over the parameter's leading dims. */
export function rowElements(shape: readonly number[]): number {
  return shape.length ? numel(shape) / Math.max(1, shape[0]!) : 1;
}
