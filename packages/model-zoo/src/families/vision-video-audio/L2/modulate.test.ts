/**
 * FLUX's adaLN arithmetic (modulate.ts) on the CPU: the elementwise chains (modulate, gatedResidual) against float64
 * loops rounded once; the blocks run their norms and modulations as layer_norm_modulate while the LayerNorms are ours
 * and fall back to the LayerNorm's own forward for a candidate standing in one (runsOwnForward), with the same result;
 * both block forms match their float64 references in f32 and bf16.
 */
import { F, Rng, compareTensors, roundToDType, toHostArray, withContext, type DType, type ExecutionContext, type Tensor } from '@fastkernels/core';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { randn } from '../../../common/inputs.js';
import { LayerNorm } from '../../../layers/norm.js';
import { randomCosSin } from '../../../tasks/L1/rotary/diffusion_rope.js';
import { baselineRegistry } from '../../../index.js';
import { initFamilyParameters } from '../cases.js';
import { FluxSingleTransformerBlock, FluxTransformerBlock, fluxBlockReference, fluxSingleBlockReference } from '../L3/flux_transformer_block.js';
import { gatedResidual, modulate } from './modulate.js';

const ctxOf = (dtype: DType): ExecutionContext => ({ backend: cpuBackend(), device: 0, dtype, registry: baselineRegistry() });
const host = (t: Tensor) => [...t.toFloat64Array()];
const paramsOf = (m: { namedParameters(): [string, Tensor][] }) => new Map(m.namedParameters().map(([k, p]) => [k, toHostArray(p)] as const));

/** A candidate for L1/layer_norm: our LayerNorm's math under its own forward (counts its calls). */
class CandidateLayerNorm extends LayerNorm {
  calls = 0;
  override forward(x: Tensor): Tensor {
    this.calls++;
    return super.forward(x);
  }
}

/** A CPU backend of its own whose layer_norm_modulate kernel counts its calls. */
function countingContext(dtype: DType): [ExecutionContext, { calls: number }] {
  const backend = new CpuBackend();
  const entry = backend.opKernels!.get('layer_norm_modulate')!;
  const count = { calls: 0 };
  backend.opKernels!.register('layer_norm_modulate', (call) => {
    count.calls++;
    return entry.kernel(call);
  }, entry.supports);
  return [{ backend, device: 0, dtype, registry: baselineRegistry() }, count];
}

describe('modulate / gatedResidual (elementwise chains)', () => {
  for (const dtype of ['f32', 'bf16'] as const) {
    it(`${dtype}: x * (1 + scale) + shift and r + gate * y over [B, S, D] with [B, D] rows (chunk views), rounded once`, () => {
      const ctx = ctxOf(dtype);
      const rng = new Rng(2);
      const [B, S, D] = [2, 3, 37];
      const x = randn(ctx, rng, [B, S, D], dtype, 2);
      const y = randn(ctx, rng, [B, S, D], dtype);
      const emb = randn(ctx, rng, [B, 3 * D], dtype);
      const [shift, scale, gate] = F.chunk(emb, 3, 1) as [Tensor, Tensor, Tensor];
      const [X, Y, E] = [host(x), host(y), host(emb)];
      const at = (t: number, c: number) => E[Math.floor(t / (S * D)) * 3 * D + c * D + (t % D)]!;
      const m = modulate(x, scale, shift);
      const g = gatedResidual(x, gate, y);
      expect(m.dtype).toBe(dtype);
      const tol = dtype === 'f32' ? 1e-6 : 0;
      host(m).forEach((v, t) => expect(Math.abs(v - roundToDType(X[t]! * (1 + at(t, 1)) + at(t, 0), dtype))).toBeLessThanOrEqual(tol * (1 + Math.abs(v))));
      host(g).forEach((v, t) => expect(Math.abs(v - roundToDType(X[t]! + at(t, 2) * Y[t]!, dtype))).toBeLessThanOrEqual(tol * (1 + Math.abs(v))));
      for (const t of [x, y, emb, shift, scale, gate, m, g]) t.dispose();
    });
  }
});

describe('the FLUX blocks fuse norm + modulation while the LayerNorms are ours', () => {
  for (const dtype of ['f32', 'bf16'] as const) {
    it(`${dtype}: double-stream block: 4 layer_norm_modulate calls, 3 with a candidate norm2 (its forward runs), same result, matches the float64 reference`, () => {
      const [ctx, count] = countingContext(dtype);
      withContext(ctx, () => {
        const rng = new Rng(7);
        const [B, S, St, D, H] = [1, 6, 3, 64, 4];
        const block = new FluxTransformerBlock(D, H, D / H);
        initFamilyParameters(block, rng);
        const h = randn(ctx, rng, [B, S, D], dtype);
        const e = randn(ctx, rng, [B, St, D], dtype);
        const temb = randn(ctx, rng, [B, D], dtype);
        const [cos, sin] = randomCosSin(ctx, rng, S + St, D / H / 2);
        const fused = block.forward(h, e, temb, cos, sin);
        expect(count.calls).toBe(4); // norm1, norm1_context, norm2, norm2_context
        const ref = fluxBlockReference(toHostArray(h), toHostArray(e), toHostArray(temb), toHostArray(cos), toHostArray(sin), paramsOf(block), H);
        const tol = dtype === 'f32' ? { atol: 1e-4, rtol: 1e-3 } : { atol: 6e-2, rtol: 5e-2 };
        fused.forEach((t, i) => expect(compareTensors(t, ref[i]!, tol).status).toBe('PASSED'));

        const own = block.norm2;
        const candidate = new CandidateLayerNorm(D, 1e-6, false);
        (block as unknown as { norm2: LayerNorm }).norm2 = candidate;
        count.calls = 0;
        const unfused = block.forward(h, e, temb, cos, sin);
        expect(count.calls).toBe(3);
        expect(candidate.calls).toBe(1);
        unfused.forEach((t, i) => expect(compareTensors(t, toHostArray(fused[i]!), dtype === 'f32' ? { atol: 1e-5, rtol: 1e-5 } : { atol: 2e-2, rtol: 2e-2 }).status).toBe('PASSED'));
        (block as unknown as { norm2: LayerNorm }).norm2 = own;
        candidate.dispose();
        for (const t of [h, e, temb, cos, sin, ...fused, ...unfused]) t.dispose();
        block.dispose();
      });
    });

    it(`${dtype}: single-stream block: one layer_norm_modulate, matches the float64 reference`, () => {
      const [ctx, count] = countingContext(dtype);
      withContext(ctx, () => {
        const rng = new Rng(8);
        const [B, N, D, H] = [2, 5, 32, 2];
        const block = new FluxSingleTransformerBlock(D, H, D / H);
        initFamilyParameters(block, rng);
        const h = randn(ctx, rng, [B, N, D], dtype);
        const temb = randn(ctx, rng, [B, D], dtype);
        const [cos, sin] = randomCosSin(ctx, rng, N, D / H / 2);
        const out = block.forward(h, temb, cos, sin);
        expect(count.calls).toBe(1);
        const ref = fluxSingleBlockReference(toHostArray(h), toHostArray(temb), toHostArray(cos), toHostArray(sin), paramsOf(block), H);
        expect(compareTensors(out, ref, dtype === 'f32' ? { atol: 1e-4, rtol: 1e-3 } : { atol: 6e-2, rtol: 5e-2 }).status).toBe('PASSED');
        for (const t of [h, temb, cos, sin, out]) t.dispose();
        block.dispose();
      });
    });
  }
});
