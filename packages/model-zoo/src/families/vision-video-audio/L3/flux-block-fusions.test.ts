/**
 * FLUX's block fusions on the CPU: the elementwise chains (modulate.ts: modulate, gatedResidual) against float64 loops
 * rounded once; the blocks run their norms and modulations as layer_norm_modulate while the LayerNorms are ours, and
 * the MLP up-projections with GELU(tanh) as one linear with the gelu_tanh epilogue (gelu-projection.ts), RoPE on q and
 * k as one rotary launch, strided q / k / v into our SDPA, each falling
 * back to the module's own forward for a candidate standing in it (runsOwnForward), with the same result;
 * both block forms match their float64 references in f32 and bf16.
 */
import { F, Rng, compareTensors, roundToDType, toHostArray, withContext, type DType, type ExecutionContext, type OpCall, type Ops, type Tensor } from '@fastkernels/core';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { randn } from '../../../common/inputs.js';
import { GELU } from '../../../layers/activation.js';
import { LayerNorm } from '../../../layers/norm.js';
import { DenseAttention } from '../../../tasks/L1/attention/dense_attention.js';
import { DiffusionRoPE, randomCosSin } from '../../../tasks/L1/rotary/diffusion_rope.js';
import { baselineRegistry } from '../../../index.js';
import { initFamilyParameters } from '../cases.js';
import { FluxSingleTransformerBlock, FluxTransformerBlock, fluxBlockReference, fluxSingleBlockReference } from '../L3/flux_transformer_block.js';
import { gatedResidual, modulate } from '../L2/modulate.js';

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

/** A CPU backend of its own that counts its layer_norm_modulate calls, its linear calls with the gelu_tanh epilogue and its rotary launches. */
function countingContext(dtype: DType): [ExecutionContext, { calls: number; geluLinears: number; rotary: number }] {
  const backend = new CpuBackend();
  const count = { calls: 0, geluLinears: 0, rotary: 0 };
  const ops = backend.ops; // frozen: the backend gets a copy with a counting rotaryEmbedding
  (backend as { ops: Ops }).ops = {
    ...ops,
    rotaryEmbedding: (...a) => {
      count.rotary++;
      return ops.rotaryEmbedding(...a);
    },
  };
  const norm = backend.opKernels!.get('layer_norm_modulate')!;
  backend.opKernels!.register('layer_norm_modulate', (call) => {
    count.calls++;
    return norm.kernel(call);
  }, norm.supports);
  const lin = backend.opKernels!.get('linear')!;
  backend.opKernels!.register('linear', (call: OpCall<{ activation: string }>) => {
    if (call.attrs.activation === 'gelu_tanh') count.geluLinears++;
    return lin.kernel(call);
  }, lin.supports);
  return [{ backend, device: 0, dtype, registry: baselineRegistry() }, count];
}

/** A candidate for L1/dense_attention that takes only contiguous q / k / v (as a hand-written kernel may). */
class ContiguousOnlyAttention extends DenseAttention {
  calls = 0;
  override forward(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | null = null): Tensor {
    this.calls++;
    expect([q, k, v].every((t) => t.isContiguous())).toBe(true);
    return super.forward(q, k, v, mask);
  }
}

/** A candidate for L1/diffusion_rope (counts its calls). */
class CandidateRoPE extends DiffusionRoPE {
  calls = 0;
  override forward(x: Tensor, cos: Tensor, sin: Tensor): Tensor {
    this.calls++;
    return super.forward(x, cos, sin);
  }
}

/** A candidate for L1/gelu: GELU's math under its own forward. */
class CandidateGELU extends GELU {
  override forward(x: Tensor): Tensor {
    return super.forward(x);
  }
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
    it(`${dtype}: double-stream block: 4 layer_norm_modulate and 2 gelu-epilogue linears, 3 and 1 with a candidate norm2 / ff GELU, one rotary launch or a candidate rope's two calls (their forwards run), same result, matches the float64 reference`, () => {
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
        expect(count.geluLinears).toBe(2); // ff and ff_context: net.0 with its GELU
        expect(count.rotary).toBe(1); // q and k of the joint sequence in one launch
        const ref = fluxBlockReference(toHostArray(h), toHostArray(e), toHostArray(temb), toHostArray(cos), toHostArray(sin), paramsOf(block), H);
        const tol = dtype === 'f32' ? { atol: 1e-4, rtol: 1e-3 } : { atol: 6e-2, rtol: 5e-2 };
        fused.forEach((t, i) => expect(compareTensors(t, ref[i]!, tol).status).toBe('PASSED'));

        const own = block.norm2;
        const candidate = new CandidateLayerNorm(D, 1e-6, false);
        (block as unknown as { norm2: LayerNorm }).norm2 = candidate;
        const ownRope = block.attn.rope;
        const rope = new CandidateRoPE();
        (block.attn as unknown as { rope: DiffusionRoPE }).rope = rope;
        const ownAct = block.ff.act;
        (block.ff as unknown as { act: GELU }).act = new CandidateGELU('tanh');
        count.calls = count.geluLinears = count.rotary = 0;
        const unfused = block.forward(h, e, temb, cos, sin);
        expect(count.calls).toBe(3);
        expect(candidate.calls).toBe(1);
        expect(count.geluLinears).toBe(1); // ff_context only: ff's GELU is a candidate
        expect([count.rotary, rope.calls]).toEqual([0, 2]); // a candidate rope rotates q and k by its own forward
        (block.attn as unknown as { rope: DiffusionRoPE }).rope = ownRope;
        rope.dispose();
        (block.ff as unknown as { act: GELU }).act = ownAct;
        unfused.forEach((t, i) => expect(compareTensors(t, toHostArray(fused[i]!), dtype === 'f32' ? { atol: 1e-5, rtol: 1e-5 } : { atol: 2e-2, rtol: 2e-2 }).status).toBe('PASSED'));
        (block as unknown as { norm2: LayerNorm }).norm2 = own;
        candidate.dispose();
        for (const t of [h, e, temb, cos, sin, ...fused, ...unfused]) t.dispose();
        block.dispose();
      });
    });

    it(`${dtype}: single-stream block: one layer_norm_modulate and one gelu-epilogue linear, matches the float64 reference; a candidate SDPA gets contiguous q / k / v`, () => {
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
        expect(count.geluLinears).toBe(1); // proj_mlp with act_mlp
        expect(count.rotary).toBe(1);
        const ref = fluxSingleBlockReference(toHostArray(h), toHostArray(temb), toHostArray(cos), toHostArray(sin), paramsOf(block), H);
        expect(compareTensors(out, ref, dtype === 'f32' ? { atol: 1e-4, rtol: 1e-3 } : { atol: 6e-2, rtol: 5e-2 }).status).toBe('PASSED');
        // our SDPA reads q / k / v as strided views; a candidate for L1/dense_attention gets them contiguous, same result
        const ownAttn = block.attn.attn;
        const candidate = new ContiguousOnlyAttention();
        (block.attn as unknown as { attn: DenseAttention }).attn = candidate;
        const viaCandidate = block.forward(h, temb, cos, sin);
        expect(candidate.calls).toBe(1);
        expect(compareTensors(viaCandidate, toHostArray(out), { atol: 0, rtol: 0 }).status).toBe('PASSED');
        (block.attn as unknown as { attn: DenseAttention }).attn = ownAttn;
        candidate.dispose();
        for (const t of [h, temb, cos, sin, out, viaCandidate]) t.dispose();
        block.dispose();
      });
    });
  }
});
