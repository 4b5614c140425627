/** Task-case helpers shared by the Qwen3-Next L2-L4 tasks: the config a case carries and parameter init. */
import { Tensor, type Module, type Rng, type TaskCase } from '@fastkernels/core';
import type { Qwen3NextConfig } from './qwen3-next-config.js';

/** The parsed config a case's init starts with. */
export const qnConfigOf = (c: Pick<TaskCase, 'init'>): Qwen3NextConfig => c.init[0] as Qwen3NextConfig;
export const qnLayerOf = (c: Pick<TaskCase, 'init'>): number => (c.init[1] as number | undefined) ?? 0;

/**
 * Parameters drawn so activations stay O(1) at any width and every gate does something: matrices N(0, 1/in) (the conv
 * kernel N(0, 1/width)), zero-centred norm weights N(0, 0.1) (scale 1 + w), the gated norm 1 + N(0, 0.1), A_log
 * N(-1, 0.5) and dt_bias N(0, 0.5) (decays exp(-0.4 softplus(a)) or so: the state remembers a few dozen tokens), the
 * router N(0, 64 / in) (clear top-k choices), the expert tensors N(0, 1/fan_in), embeddings N(0, 1).
 */
export function initQwen3NextParameters(m: Module, rng: Rng): void {
  const params = m.namedParameters();
  // a gated DeltaNet module as the root names its gated norm plain 'norm.weight'
  const gdnRoot = params.some(([n]) => n === 'A_log');
  for (const [name, p] of params) {
    if (name.endsWith('cos_sin_cache')) continue;
    let v: Float64Array;
    if (/(^|\.)linear_attn\.norm\.weight$/.test(name) || (gdnRoot && name === 'norm.weight')) v = rng.fillNormal(p.numel, 0.1).map((x) => x + 1);
    else if (/(layernorm|q_norm|k_norm|(^|\.)norm)\.weight$/.test(name)) v = rng.fillNormal(p.numel, 0.1);
    else if (name.endsWith('A_log')) v = rng.fillNormal(p.numel, 0.5).map((x) => x - 1);
    else if (name.endsWith('dt_bias')) v = rng.fillNormal(p.numel, 0.5);
    else if (name.endsWith('conv1d.weight')) v = rng.fillNormal(p.numel, 1 / Math.sqrt(p.shape[2]!));
    else if (name.endsWith('embed_tokens.weight')) v = rng.fillNormal(p.numel, 1);
    else if (name.endsWith('w13_weight') || name.endsWith('w2_weight')) v = rng.fillNormal(p.numel, 1 / Math.sqrt(p.shape[2]!));
    else if (/(^|\.)gate\.weight$/.test(name)) v = rng.fillNormal(p.numel, 8 / Math.sqrt(p.shape[1]!));
    else if (p.shape.length === 2) v = rng.fillNormal(p.numel, 1 / Math.sqrt(p.shape[1]!));
    else v = rng.fillNormal(p.numel, 1);
    const t = Tensor.fromArray(p.backend, v, p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}

/** The f32 bounds of the tasks with a state out: in a bf16 case the states carry the bf16 projections' rounding. */
export const QN_STATE_TOLERANCE = { atol: 5e-2, rtol: 5e-2 } as const;
