/**
 * Inputs of the Qwen3-Next tasks that run one engine step (L3 decoder, L4 model): the dense-moe-llm step harness
 * (task-batch.ts: a mixed batch over a valid paged KV cache, the forward context set) plus the recurrent layers' state
 * pools and the step's state indices, as the engine would give them: each sequence its own pool slot (shuffled, with a
 * spare), zeros for the prefills (fresh sequences), random states for the decodes (a context behind them). The states
 * each sequence starts from are kept for the float64 reference.
 *
 * A DeltaNet layer updates its pool rows in place, and the harness runs the baseline and then the candidate on one set
 * of inputs: so each layer's pool entry hands out its states restored to the step's starting values every time a layer
 * reads them (once per forward call), and every run starts from the same states. The engine's pools are plain.
 */
import { Tensor, type ExecutionContext, type Rng, type TaskCase } from '@fastkernels/core';
import { fromInts } from '../../common/inputs.js';
import { getForwardContext, setForwardContext, type LayerStateCache } from '../../engine/forward-context.js';
import { buildTaskStep, stepSpec, type TaskStep } from '../dense-moe-llm/task-batch.js';
import type { Qwen3NextConfig } from './qwen3-next-config.js';
import type { GdnState } from './qwen3-next-reference.js';

export interface Qwen3NextStep extends TaskStep {
  /** states[layer][sequence]: where each sequence's DeltaNet state starts (null: zeros); [] for attention layers. */
  readonly states: (GdnState | null)[][];
}

const steps = new WeakMap<object, Qwen3NextStep>();
let lastPools: Tensor[] = [];
let lastIndices: Tensor | null = null;

export function qwen3NextStepFor(c: TaskCase): Qwen3NextStep {
  const s = steps.get(c);
  if (!s) throw new Error(`case '${c.name}': no step recorded (makeInputs must run before the reference)`);
  return s;
}

/** Build the step for layers [0, numLayers) (an L3 case: up to its layer; the others' pools are empty holes). */
export function buildQwen3NextStep(c: TaskCase, ctx: ExecutionContext, rng: Rng, cfg: Qwen3NextConfig, numLayers: number, onlyLayer: number | null = null): Qwen3NextStep {
  const step = buildTaskStep(c, ctx, rng, { numLayers, numKvHeads: cfg.numKeyValueHeads, headDim: cfg.headDim, lastLayerOnly: onlyLayer !== null });
  const spec = stepSpec(c);
  const P = spec.prefillLens.length;
  const n = P + spec.decodeCtxLens.length;
  const slots = rng.permutation(n + 1).slice(0, n);
  const { convDim, linearConvKernelDim: W, linearNumValueHeads: HV, linearKeyHeadDim: K, linearValueHeadDim: V } = cfg;
  const [convRow, recRow] = [convDim * (W - 1), HV * K * V];
  for (const t of lastPools) t.dispose();
  lastPools = [];
  const states: (GdnState | null)[][] = [];
  const stateCaches: (LayerStateCache | undefined)[] = [];
  for (let l = 0; l < numLayers; l++) {
    if (cfg.layerTypes[l] !== 'linear_attention' || (onlyLayer !== null && l !== onlyLayer)) {
      states.push([]);
      stateCaches.push(undefined);
      continue;
    }
    const conv = rng.fillNormal((n + 1) * convRow, 1);
    const rec = rng.fillNormal((n + 1) * recRow, 0.5);
    const per: (GdnState | null)[] = [];
    slots.forEach((s, i) => {
      if (i < P) {
        conv.fill(0, s * convRow, (s + 1) * convRow);
        rec.fill(0, s * recRow, (s + 1) * recRow);
        per.push(null);
      } else per.push({ conv: conv.slice(s * convRow, (s + 1) * convRow), recurrent: rec.slice(s * recRow, (s + 1) * recRow) });
    });
    const make = () => [Tensor.fromArray(ctx.backend, conv, [n + 1, convDim, W - 1], 'f32', { device: ctx.device }), Tensor.fromArray(ctx.backend, rec, [n + 1, HV, K, V], 'f32', { device: ctx.device })];
    const [pools, start] = [make(), make()];
    lastPools.push(...pools, ...start);
    stateCaches.push({
      get states() {
        pools.forEach((p, i) => p.copy_(start[i]!));
        return pools;
      },
    });
    states.push(per);
  }
  const fc = getForwardContext();
  lastIndices?.dispose();
  lastIndices = fromInts(ctx, slots, [n], 'i32');
  setForwardContext({ ...fc, attnMetadata: { ...fc.attnMetadata, stateIndices: lastIndices }, stateCaches });
  const out = { ...step, states };
  steps.set(c, out);
  return out;
}
