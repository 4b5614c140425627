/**
 * FluxTransformer2DModel (tiny config: 2 double + 2 single blocks) on the CPU against its float64 reference, which
 * also covers FluxSingleTransformerBlock; and the weight plan reads diffusers' checkpoint names (to_q / to_k / to_v
 * stacked into to_qkv).
 */
import { Rng, Tensor, compareTensors, toHostArray, withContext, type ExecutionContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { userError } from '../../../test/user-error.js';
import { randn } from '../../common/inputs.js';
import { baselineRegistry } from '../../index.js';
import { fluxIds } from '../../tasks/L1/rotary/flux_pos_embed.js';
import { planWeights } from '../../weights/weight-plan.js';
import { initFamilyParameters } from './cases.js';
import { FLUX1_DEV, parseFluxConfig, tinyFluxConfig } from './flux-config.js';
import { FluxTransformer2DModel, fluxTransformerReference } from './L4/flux_transformer.js';
import { fluxTransformerWeightRules } from './weights.js';

const cfg = tinyFluxConfig();

describe('FluxTransformer2DModel', () => {
  it('one denoising step matches the float64 reference (f32, two prompts, guidance)', () => {
    const registry = baselineRegistry();
    const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype: 'f32', registry };
    withContext(ctx, () => {
      const m = new FluxTransformer2DModel(cfg);
      const rng = new Rng(5);
      initFamilyParameters(m, rng);
      const B = 2;
      const [h, w, St] = [3, 4, 5];
      const x = randn(ctx, rng, [B, h * w, cfg.inChannels], 'f32');
      const enc = randn(ctx, rng, [B, St, cfg.jointAttentionDim], 'f32');
      const pooled = randn(ctx, rng, [B, cfg.pooledProjectionDim], 'f32');
      const t = Tensor.fromArray(ctx.backend, [0.9, 0.35], [B], 'f32');
      const g = Tensor.fromArray(ctx.backend, [3.5, 3.5], [B], 'f32');
      const all = fluxIds(ctx, St, h, w, 'f32');
      const txtIds = all.narrow(0, 0, St);
      const imgIds = all.narrow(0, St, h * w);
      const out = m.forward(x, enc, pooled, t, imgIds, txtIds, g);
      expect(out.shape).toEqual([B, h * w, cfg.outChannels]);
      const params = new Map(m.namedParameters().map(([k, p]) => [k, toHostArray(p)] as const));
      const ref = fluxTransformerReference(toHostArray(x), toHostArray(enc), toHostArray(pooled), toHostArray(t), toHostArray(imgIds), toHostArray(txtIds), toHostArray(g), params, cfg);
      const cmp = compareTensors(out, ref, { atol: 1e-4, rtol: 1e-3 });
      expect(cmp.status, `maxAbs ${cmp.maxAbsError}`).toBe('PASSED');
      expect(() => m.forward(x, enc, pooled, t, imgIds, txtIds, null)).toThrow(/guidance/);
      m.dispose();
    });
  });

  it("reads diffusers' checkpoint names: to_q / to_k / to_v stacked into to_qkv, single blocks unprefixed", () => {
    const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype: 'f32', registry: baselineRegistry() };
    withContext(ctx, () => {
      const m = new FluxTransformer2DModel(cfg);
      const names = new Set(planWeights(m, fluxTransformerWeightRules(cfg)).map((p) => p.hfName));
      for (const n of [
        'transformer_blocks.0.attn.to_q.weight', 'transformer_blocks.1.attn.add_v_proj.bias', 'transformer_blocks.0.attn.norm_added_k.weight',
        'transformer_blocks.0.attn.to_out.0.weight', 'transformer_blocks.0.attn.to_add_out.bias', 'transformer_blocks.0.norm1_context.linear.weight',
        'transformer_blocks.1.ff.net.0.proj.weight', 'transformer_blocks.1.ff_context.net.2.bias', 'single_transformer_blocks.1.attn.to_k.weight',
        'single_transformer_blocks.0.norm.linear.weight', 'single_transformer_blocks.0.proj_mlp.weight', 'single_transformer_blocks.0.proj_out.bias',
        'time_text_embed.guidance_embedder.linear_2.weight', 'time_text_embed.text_embedder.linear_1.weight', 'time_text_embed.timestep_embedder.linear_1.bias',
        'context_embedder.weight', 'x_embedder.bias', 'norm_out.linear.weight', 'proj_out.weight',
      ]) expect(names, n).toContain(n);
      expect([...names].some((n) => n.includes('to_qkv') || n.includes('add_kv_proj') || n.includes('single_transformer_blocks.0.attn.to_out'))).toBe(false);
      m.dispose();
    });
  });

  it('FLUX.1-dev config: 19 + 38 blocks of 24 x 128; bad fields are UserErrors naming them', () => {
    expect(FLUX1_DEV).toMatchObject({ numLayers: 19, numSingleLayers: 38, innerDim: 3072, guidanceEmbeds: true, outChannels: 64 });
    expect(userError(() => parseFluxConfig({ axes_dims_rope: [16, 56, 50] }, 'x.json')).message).toMatch(/axes_dims_rope sums to 122, not attention_head_dim 128 in x.json/);
    expect(userError(() => parseFluxConfig({ num_layers: -1 }, 'x.json')).message).toMatch(/invalid field num_layers in x.json/);
  });
});
