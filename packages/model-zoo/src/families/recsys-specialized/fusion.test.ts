/**
 * The encoder layer's fusions (fusion.ts) on the CPU: with our own modules an XLM-R layer runs its two residual
 * LayerNorms as add_layer_norm and the FFN up-projection as linear with the GELU epilogue (no separate add, layer_norm
 * or gelu); a candidate standing in L1/layer_norm or L1/gelu (a module whose forward is not ours) turns that fusion off
 * and is called itself; both give the same values (float64: the fusions only drop intermediate roundings).
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, withContext, type ExecutionContext, type OpCall, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { randn } from '../../common/inputs.js';
import { GELU } from '../../layers/activation.js';
import { LayerNorm } from '../../layers/norm.js';
import { baselineRegistry } from '../../index.js';
import { cuSeqlensTensor, initEncoderParameters } from './cases.js';
import { TINY_XLMR } from './L3/encoder-cases.js';
import type { XLMRobertaLayer } from './L3/xlm_roberta_layer.js';

const COUNTED = ['add_layer_norm', 'layer_norm', 'add', 'gelu', 'linear'] as const;

/** A CPU backend whose registry kernels of COUNTED count their calls (linear by its activation). */
function countingBackend(): { backend: CpuBackend; calls: Map<string, number> } {
  const backend = new CpuBackend();
  const calls = new Map<string, number>();
  const table = backend.opKernels;
  for (const op of COUNTED) {
    const entry = table.get(op)!;
    table.register(op, (call: OpCall<{ activation?: string }>) => {
      const key = op === 'linear' ? `linear:${call.attrs.activation ?? 'none'}` : op;
      calls.set(key, (calls.get(key) ?? 0) + 1);
      return entry.kernel(call);
    }, entry.supports);
  }
  return { backend, calls };
}

/** A candidate in place of one of our modules: same instance and weights, a forward of its own. */
function standIn<M extends object>(m: M, cls: new (...a: never[]) => M): void {
  const Candidate = class extends (cls as unknown as new (...a: unknown[]) => { forward(x: Tensor): Tensor }) {
    override forward(x: Tensor): Tensor {
      return super.forward(x);
    }
  };
  Object.setPrototypeOf(m, Candidate.prototype);
}

describe('XLM-R layer fusions', () => {
  it('add_layer_norm and linear + GELU with our modules; the unfused sequence (and the candidate) otherwise; same values', () => {
    const { backend, calls } = countingBackend();
    const registry = baselineRegistry();
    const ctx: ExecutionContext = { backend, device: 0, dtype: 'f64', registry };
    const layer = registry.createIn<XLMRobertaLayer>(ctx, 'L3/xlm_roberta_layer', TINY_XLMR);
    const rng = new Rng(3);
    initEncoderParameters(layer, rng);
    const lens = [5, 1, 7];
    const x = withContext(ctx, () => randn(ctx, rng, [13, TINY_XLMR.hiddenSize], 'f64'));
    const cu = withContext(ctx, () => cuSeqlensTensor(ctx, lens));

    const fused = withContext(ctx, () => layer.forward(x, cu));
    expect(Object.fromEntries(calls)).toEqual({ add_layer_norm: 2, 'linear:gelu': 1 });

    calls.clear();
    standIn(layer.attention.layerNorm, LayerNorm);
    standIn(layer.output.layerNorm, LayerNorm);
    standIn(layer.intermediate.act, GELU);
    const unfused = withContext(ctx, () => layer.forward(x, cu));
    expect(Object.fromEntries(calls)).toEqual({ add: 2, layer_norm: 2, gelu: 1 });

    const a = fused.toFloat64Array();
    const b = unfused.toFloat64Array();
    const err = Math.max(...a.map((v, i) => Math.abs(v - b[i]!)));
    expect(err).toBeLessThan(1e-12);
    for (const t of [x, cu, fused, unfused]) t.dispose();
    layer.dispose();
  });
});
