/** parseMoeConfig: HF defaults per model_type, the expert fields, and UserErrors naming the field. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { userError } from '../../../test/user-error.js';
import { parseMoeConfig } from './moe/config.js';

const FIXTURES = join(import.meta.dirname, '../../../fixtures');
const raw = (name: string) => JSON.parse(readFileSync(join(FIXTURES, name, 'config.json'), 'utf8')) as Record<string, unknown>;

describe('parseMoeConfig', () => {
  it('reads the tiny Mixtral: Mistral attention, 8 experts top-2, always renormalised, no q/k norm', () => {
    const c = parseMoeConfig(raw('tiny-mixtral'));
    expect(c).toMatchObject({ modelType: 'mixtral', numExperts: 8, numExpertsPerTok: 2, moeIntermediateSize: 96, normTopkProb: true, qkNorm: false, qkvBias: false, oProjBias: false, headDim: 16, ropeTheta: 1e6, rmsNormEps: 1e-5, denseLayers: [], dtype: 'f32' });
    expect(c.slidingWindows).toEqual([0, 0]);
    expect(parseMoeConfig({ ...raw('tiny-mixtral'), sliding_window: 32 }).slidingWindows).toEqual([32, 32]);
  });

  it("applies MixtralConfig's defaults (8 experts, top-2, rope_theta 1e6, eps 1e-5) where the file is silent", () => {
    const { num_local_experts: _e, num_experts_per_tok: _k, rope_theta: _t, rms_norm_eps: _n, ...rest } = raw('tiny-mixtral');
    expect(parseMoeConfig(rest)).toMatchObject({ numExperts: 8, numExpertsPerTok: 2, ropeTheta: 1e6, rmsNormEps: 1e-5 });
  });

  it('reads the tiny Qwen3-MoE: q/k norms, moe_intermediate_size, norm_topk_prob, dense layers from mlp_only_layers and decoder_sparse_step', () => {
    const c = parseMoeConfig(raw('tiny-qwen3-moe'));
    expect(c).toMatchObject({ modelType: 'qwen3_moe', numExperts: 16, numExpertsPerTok: 4, moeIntermediateSize: 32, intermediateSize: 128, normTopkProb: true, qkNorm: true, qkvBias: false, oProjBias: false, denseLayers: [] });
    expect(parseMoeConfig({ ...raw('tiny-qwen3-moe'), mlp_only_layers: [0] }).denseLayers).toEqual([0]);
    expect(parseMoeConfig({ ...raw('tiny-qwen3-moe'), decoder_sparse_step: 2 }).denseLayers).toEqual([0]);
    expect(parseMoeConfig({ ...raw('tiny-qwen3-moe'), attention_bias: true })).toMatchObject({ qkvBias: true, oProjBias: false });
    const { norm_topk_prob: _p, ...noNorm } = raw('tiny-qwen3-moe');
    expect(parseMoeConfig(noNorm).normTopkProb).toBe(false);
  });

  it('a wrong config is a UserError naming the file and the field', () => {
    expect(userError(() => parseMoeConfig({ ...raw('tiny-mixtral'), model_type: 'llama' }, 'c.json')).message).toBe("unsupported model_type 'llama' in c.json: supported: mixtral, qwen3_moe");
    const k = userError(() => parseMoeConfig({ ...raw('tiny-mixtral'), num_experts_per_tok: 9 }, 'c.json'));
    expect([k.message, k.details.field]).toEqual(['num_experts_per_tok 9 exceeds the 8 experts in c.json', 'num_experts_per_tok']);
    expect(userError(() => parseMoeConfig({ ...raw('tiny-qwen3-moe'), mlp_only_layers: [5] }, 'c.json')).details.field).toBe('mlp_only_layers');
    expect(userError(() => parseMoeConfig({ ...raw('tiny-qwen3-moe'), use_sliding_window: true }, 'c.json')).details.field).toBe('use_sliding_window');
    expect(userError(() => parseMoeConfig({ ...raw('tiny-qwen3-moe'), num_experts: 0 }, 'c.json')).message).toMatch(/^invalid field num_experts in c.json/);
    expect(userError(() => parseMoeConfig({ ...raw('tiny-mixtral'), hidden_act: 'gelu' }, 'c.json')).details.field).toBe('hidden_act');
  });
});
