/** Task-case helpers shared by the Kimi-Linear L2-L4 tasks: the config a case carries and parameter init. */
import { Tensor, type Module, type Rng, type TaskCase } from '@fastkernels/core';
import type { KimiLinearConfig } from './kimi-linear-config.js';

/** The parsed config a case's init starts with. */
export const kimiConfigOf = (c: Pick<TaskCase, 'init'>): KimiLinearConfig => c.init[0] as KimiLinearConfig;
export const kimiLayerOf = (c: Pick<TaskCase, 'init'>): number => (c.init[1] as number | undefined) ?? 0;

/**
 * Parameters drawn so activations stay O(1) at any width and every gate does something: matrices N(0, 1/in) (the conv
 * kernels N(0, 1/width)), norm weights 1 + N(0, 0.1), A_log N(-1, 0.5) and dt_bias N(0, 0.5) (decays of a few dozen
 * tokens), the router N(0, 4/in) with a correction bias N(0, 0.3) (both change the choice), the expert tensors
 * N(0, 1/fan_in), embeddings N(0, 1).
 */
export function initKimiParameters(m: Module, rng: Rng): void {
  for (const [name, p] of m.namedParameters()) {
    let v: Float64Array;
    if (/(norm|layernorm)\.weight$/.test(name)) v = rng.fillNormal(p.numel, 0.1).map((x) => x + 1);
    else if (name.endsWith('A_log')) v = rng.fillNormal(p.numel, 0.5).map((x) => x - 1);
    else if (name.endsWith('dt_bias')) v = rng.fillNormal(p.numel, 0.5);
    else if (name.endsWith('e_score_correction_bias')) v = rng.fillNormal(p.numel, 0.3);
    else if (name.endsWith('conv1d.weight')) v = rng.fillNormal(p.numel, 1 / Math.sqrt(p.shape[2]!));
    else if (name.endsWith('embed_tokens.weight')) v = rng.fillNormal(p.numel, 1);
    else if (name.endsWith('w13_weight') || name.endsWith('w2_weight')) v = rng.fillNormal(p.numel, 1 / Math.sqrt(p.shape[2]!));
    else if (/(^|\.)gate\.weight$/.test(name)) v = rng.fillNormal(p.numel, 4 / Math.sqrt(p.shape[1]!));
    else if (p.shape.length === 2) v = rng.fillNormal(p.numel, 1 / Math.sqrt(p.shape[1]!));
    else v = rng.fillNormal(p.numel, 1);
    const t = Tensor.fromArray(p.backend, v, p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}

/** The f32 bounds of the tasks with a state out: in a bf16 case the states carry the bf16 projections' rounding. */
export const KIMI_STATE_TOLERANCE = { atol: 5e-2, rtol: 5e-2 } as const;
