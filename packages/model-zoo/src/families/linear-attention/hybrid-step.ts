/**
 * Inputs of a hybrid model's tasks that run one engine step (L3 decoder, L4 model), shared by Qwen3-Next and
 * Kimi-Linear: the dense-moe-llm step harness (task-batch.ts: a mixed batch over a valid paged KV cache, the forward
 * context set) plus the recurrent layers' state pools and the step's state indices, as the engine gives them: each
 * sequence its own pool slot (shuffled, with a spare), zeros for the prefills (fresh sequences), random states for the
 * decodes (a context behind them). The states each sequence starts from are kept for the float64 reference.
 *
 * A recurrent layer updates its pool rows in place, and the harness runs the baseline and then the candidate on one set
 * of inputs: so each layer's pool entry hands out its states restored to the step's starting values every time a layer
 * reads them (once per forward call), and every run starts from the same states. The engine's pools are plain.
 */
import { Tensor, type ExecutionContext, type Rng, type TaskCase } from '@fastkernels/core';
import { fromInts } from '../../common/inputs.js';
import { getForwardContext, setForwardContext, type LayerStateCache } from '../../engine/forward-context.js';
import { buildTaskStep, stepSpec, type TaskStep } from '../dense-moe-llm/task-batch.js';

export interface HybridStep<S> extends TaskStep {
  /** states[layer][sequence]: where each sequence's recurrent state starts (null: zeros); [] for attention layers. */
  readonly states: (S | null)[][];
}

/** What differs between the models: the paged cache's layout, which layers are recurrent, their pools. */
export interface HybridStepModel<C, S> {
  /** What the model's attention layers keep per token in the paged cache (latent: one tensor, MLA's rows). */
  kvLayout(cfg: C): { numKvHeads: number; headDim: number; latent?: boolean };
  isRecurrent(cfg: C, layer: number): boolean;
  /** A recurrent layer's pools in order: one slot's shape, and the scale of a decode's random starting state. */
  pools(cfg: C): { slotShape: number[]; scale: number }[];
  /** One sequence's starting state for the reference, from its rows of each pool (in `pools` order). */
  state(rows: Float64Array[]): S;
}

/** A model's step builder: build(...) in makeInputs, stepFor(case) in the reference. */
export function hybridStepBuilder<C, S>(model: HybridStepModel<C, S>) {
  const steps = new WeakMap<object, HybridStep<S>>();
  let lastPools: Tensor[] = [];
  let lastIndices: Tensor | null = null;

  function stepFor(c: TaskCase): HybridStep<S> {
    const s = steps.get(c);
    if (!s) throw new Error(`case '${c.name}': no step recorded (makeInputs must run before the reference)`);
    return s;
  }

  /** Build the step for layers [0, numLayers) (an L3 case: up to its layer; the others' pools are empty holes). */
  function build(c: TaskCase, ctx: ExecutionContext, rng: Rng, cfg: C, numLayers: number, onlyLayer: number | null = null): HybridStep<S> {
    const step = buildTaskStep(c, ctx, rng, { numLayers, ...model.kvLayout(cfg), lastLayerOnly: onlyLayer !== null });
    const spec = stepSpec(c);
    const P = spec.prefillLens.length;
    const n = P + spec.decodeCtxLens.length;
    const slots = rng.permutation(n + 1).slice(0, n);
    const pools = model.pools(cfg);
    const rows = pools.map((p) => p.slotShape.reduce((a, b) => a * b, 1));
    for (const t of lastPools) t.dispose();
    lastPools = [];
    const states: (S | null)[][] = [];
    const stateCaches: (LayerStateCache | undefined)[] = [];
    for (let l = 0; l < numLayers; l++) {
      if (!model.isRecurrent(cfg, l) || (onlyLayer !== null && l !== onlyLayer)) {
        states.push([]);
        stateCaches.push(undefined);
        continue;
      }
      const data = rows.map((r, j) => rng.fillNormal((n + 1) * r, pools[j]!.scale));
      const per: (S | null)[] = [];
      slots.forEach((s, i) => {
        if (i < P) {
          data.forEach((d, j) => d.fill(0, s * rows[j]!, (s + 1) * rows[j]!));
          per.push(null);
        } else per.push(model.state(data.map((d, j) => d.slice(s * rows[j]!, (s + 1) * rows[j]!))));
      });
      const make = () => data.map((d, j) => Tensor.fromArray(ctx.backend, d, [n + 1, ...pools[j]!.slotShape], 'f32', { device: ctx.device }));
      const [live, start] = [make(), make()];
      lastPools.push(...live, ...start);
      stateCaches.push({
        get states() {
          live.forEach((p, i) => p.copy_(start[i]!));
          return live;
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

  return { build, stepFor };
}
