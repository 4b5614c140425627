/**
 * Inputs of the Kimi-Linear tasks that run one engine step (L3 decoder, L4 model): the dense-moe-llm step harness
 * (task-batch.ts: a mixed batch over a valid paged KV cache of the MLA layers' latent rows, the forward context set) plus the KDA layers' four state pools (q, k, v conv states and the recurrent state) and the
 * step's state indices, as the engine gives them: each sequence its own slot (shuffled, with a spare), zeros for the
 * prefills (fresh sequences), random states for the decodes. The states each sequence starts from are kept for the
 * float64 reference. As in qwen3-next-step.ts, each layer's pools are restored to the step's starting values every time
 * a layer reads them, so the baseline and a candidate run from the same states.
 */
import { Tensor, type ExecutionContext, type Rng, type TaskCase } from '@fastkernels/core';
import { fromInts } from '../../common/inputs.js';
import { getForwardContext, setForwardContext, type LayerStateCache } from '../../engine/forward-context.js';
import { buildTaskStep, type TaskStep } from '../dense-moe-llm/task-batch.js';
import { stepSpec } from '../dense-moe-llm/task-batch.js';
import type { KimiLinearConfig } from './kimi-linear-config.js';
import type { KdaState } from './kimi-linear-reference.js';

export interface KimiStep extends TaskStep {
  /** states[layer][sequence]: where each sequence's KDA state starts (null: zeros); [] for MLA layers. */
  readonly states: (KdaState | null)[][];
}

const steps = new WeakMap<object, KimiStep>();
let lastPools: Tensor[] = [];
let lastIndices: Tensor | null = null;

export function kimiStepFor(c: TaskCase): KimiStep {
  const s = steps.get(c);
  if (!s) throw new Error(`case '${c.name}': no step recorded (makeInputs must run before the reference)`);
  return s;
}

/** Build the step for layers [0, numLayers) (an L3 case: up to its layer; the others' pools are empty holes). */
export function buildKimiStep(c: TaskCase, ctx: ExecutionContext, rng: Rng, cfg: KimiLinearConfig, numLayers: number, onlyLayer: number | null = null): KimiStep {
  const step = buildTaskStep(c, ctx, rng, { numLayers, numKvHeads: 1, headDim: cfg.kvLoraRank + cfg.qkRopeHeadDim, lastLayerOnly: onlyLayer !== null });
  const spec = stepSpec(c);
  const P = spec.prefillLens.length;
  const n = P + spec.decodeCtxLens.length;
  const slots = rng.permutation(n + 1).slice(0, n);
  const { kdaProjSize: C, kdaConvKernelSize: W, kdaNumHeads: H, kdaHeadDim: K } = cfg;
  const rows = [C * (W - 1), C * (W - 1), C * (W - 1), H * K * K];
  const shapes = [[n + 1, C, W - 1], [n + 1, C, W - 1], [n + 1, C, W - 1], [n + 1, H, K, K]];
  for (const t of lastPools) t.dispose();
  lastPools = [];
  const states: (KdaState | null)[][] = [];
  const stateCaches: (LayerStateCache | undefined)[] = [];
  for (let l = 0; l < numLayers; l++) {
    if (cfg.layerTypes[l] !== 'kda' || (onlyLayer !== null && l !== onlyLayer)) {
      states.push([]);
      stateCaches.push(undefined);
      continue;
    }
    const data = rows.map((r, i) => rng.fillNormal((n + 1) * r, i === 3 ? 0.5 : 1));
    const per: (KdaState | null)[] = [];
    slots.forEach((s, i) => {
      if (i < P) {
        data.forEach((d, j) => d.fill(0, s * rows[j]!, (s + 1) * rows[j]!));
        per.push(null);
      } else {
        const [qConv, kConv, vConv, recurrent] = data.map((d, j) => d.slice(s * rows[j]!, (s + 1) * rows[j]!)) as [Float64Array, Float64Array, Float64Array, Float64Array];
        per.push({ qConv, kConv, vConv, recurrent });
      }
    });
    const make = () => data.map((d, j) => Tensor.fromArray(ctx.backend, d, shapes[j]!, 'f32', { device: ctx.device }));
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
