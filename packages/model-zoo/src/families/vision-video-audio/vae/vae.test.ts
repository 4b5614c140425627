/**
 * The AutoencoderKL decoder (tiny FLUX-style configs) on the CPU against its float64 reference, diffusers' checkpoint
 * names through the weight plan, and the config schema.
 */
import { Rng, compareTensors, toHostArray, withContext, type ExecutionContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { userError } from '../../../../test/user-error.js';
import { randn } from '../../../common/inputs.js';
import { baselineRegistry } from '../../../index.js';
import { planWeights } from '../../../weights/weight-plan.js';
import { initFamilyParameters } from '../cases.js';
import { vaeWeightRules } from '../weights.js';
import { AutoencoderKL } from './autoencoder_kl.js';
import { vaeDecodeReference } from './reference.js';
import { FLUX1_DEV_VAE, parseVaeConfig, tinyVaeConfig, type AutoencoderKLConfig } from './vae-config.js';

const ctxOf = (): ExecutionContext => ({ backend: cpuBackend(), device: 0, dtype: 'f32', registry: baselineRegistry() });

function decodeMatches(cfg: AutoencoderKLConfig, seed: number, N: number, h: number, w: number): void {
  const ctx = ctxOf();
  withContext(ctx, () => {
    const vae = new AutoencoderKL(cfg);
    const rng = new Rng(seed);
    initFamilyParameters(vae, rng);
    const z = randn(ctx, rng, [N, cfg.latentChannels, h, w], 'f32');
    const img = vae.decode(z);
    const up = cfg.vaeScaleFactor;
    expect(img.shape).toEqual([N, cfg.outChannels, h * up, w * up]);
    const params = new Map(vae.namedParameters().map(([k, p]) => [k, toHostArray(p)] as const));
    const ref = vaeDecodeReference(toHostArray(z), params, cfg);
    const cmp = compareTensors(img, ref, { atol: 1e-4, rtol: 1e-3 });
    expect(cmp.status, `maxAbs ${cmp.maxAbsError}`).toBe('PASSED');
    img.dispose();
    z.dispose();
    vae.dispose();
  });
}

describe('AutoencoderKL decoder', () => {
  it('FLUX layout (16 latent channels, no post_quant_conv): decode matches the float64 reference', () => {
    decodeMatches(tinyVaeConfig(), 1, 2, 3, 4);
  });

  it('three blocks, layers_per_block 2, post_quant_conv, no mid-block attention', () => {
    decodeMatches(tinyVaeConfig({ blockOutChannels: [4, 8, 8], layersPerBlock: 2, usePostQuantConv: true, midBlockAddAttention: false, latentChannels: 4 }), 2, 1, 2, 3);
  });

  it("reads diffusers' checkpoint names; the encoder half and quant_conv are ignored", () => {
    withContext(ctxOf(), () => {
      const cfg = tinyVaeConfig();
      const vae = new AutoencoderKL(cfg);
      const rules = vaeWeightRules(cfg);
      const names = new Set(planWeights(vae, rules).map((p) => p.hfName));
      for (const n of [
        'decoder.conv_in.weight', 'decoder.mid_block.resnets.0.norm1.weight', 'decoder.mid_block.resnets.1.conv2.bias',
        'decoder.mid_block.attentions.0.group_norm.bias', 'decoder.mid_block.attentions.0.to_q.weight', 'decoder.mid_block.attentions.0.to_out.0.weight',
        'decoder.up_blocks.0.resnets.1.conv1.weight', 'decoder.up_blocks.0.upsamplers.0.conv.weight', 'decoder.up_blocks.1.resnets.0.conv_shortcut.weight',
        'decoder.conv_norm_out.weight', 'decoder.conv_out.bias',
      ]) expect(names, n).toContain(n);
      expect([...names].some((n) => n.includes('up_blocks.1.upsamplers') || n.startsWith('post_quant_conv') || n.includes('time_emb_proj'))).toBe(false);
      expect(rules.ignore!.some((r) => r.test('encoder.down_blocks.0.resnets.0.conv1.weight'))).toBe(true);
      expect(rules.norms!.test('decoder.mid_block.attentions.0.group_norm.weight')).toBe(true);
      vae.dispose();
    });
  });

  it('FLUX.1-dev vae config: 16 latent channels, 8x, scaling and shift; bad fields are UserErrors naming them', () => {
    expect(FLUX1_DEV_VAE).toMatchObject({ latentChannels: 16, vaeScaleFactor: 8, scalingFactor: 0.3611, shiftFactor: 0.1159, usePostQuantConv: false, blockOutChannels: [128, 256, 512, 512] });
    expect(userError(() => parseVaeConfig({ _class_name: 'AutoencoderTiny' }, 'v.json')).message).toMatch(/_class_name 'AutoencoderTiny' is not AutoencoderKL in v.json/);
    expect(userError(() => parseVaeConfig({ block_out_channels: [48], norm_num_groups: 32 }, 'v.json')).message).toMatch(/block_out_channels entry 48 is not divisible by norm_num_groups 32/);
    expect(userError(() => parseVaeConfig({ layers_per_block: 'two' }, 'v.json')).message).toMatch(/invalid field layers_per_block in v.json/);
  });
});
