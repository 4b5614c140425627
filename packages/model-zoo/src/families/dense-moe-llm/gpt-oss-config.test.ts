/** parseGptOssConfig: the published gpt-oss configs, HF's defaults, and UserErrors naming file and field. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { userError } from '../../../test/user-error.js';
import { GPT_OSS_120B_CONFIG, GPT_OSS_20B_CONFIG, parseGptOssConfig, tinyGptOssConfig } from './gpt-oss/config.js';

const FIXTURES = join(import.meta.dirname, '../../../fixtures');
const tiny = () => JSON.parse(readFileSync(join(FIXTURES, 'tiny-gpt-oss', 'config.json'), 'utf8')) as Record<string, unknown>;

/** openai/gpt-oss-20b's config.json as published (layer_types: 12 x [sliding, full]); -120b has 36 layers and 128 experts. */
const REAL_20B = {
  architectures: ['GptOssForCausalLM'], attention_bias: true, attention_dropout: 0.0, eos_token_id: 200002, experts_per_token: 4, head_dim: 64,
  hidden_act: 'silu', hidden_size: 2880, initial_context_length: 4096, initializer_range: 0.02, intermediate_size: 2880,
  layer_types: Array.from({ length: 24 }, (_, i) => (i % 2 ? 'full_attention' : 'sliding_attention')), max_position_embeddings: 131072,
  model_type: 'gpt_oss', num_attention_heads: 64, num_experts_per_tok: 4, num_hidden_layers: 24, num_key_value_heads: 8, num_local_experts: 32,
  output_router_logits: false, pad_token_id: 199999,
  quantization_config: { modules_to_not_convert: ['model.layers.*.self_attn', 'model.layers.*.mlp.router', 'model.embed_tokens', 'lm_head'], quant_method: 'mxfp4' },
  rms_norm_eps: 1e-5, rope_scaling: { beta_fast: 32.0, beta_slow: 1.0, factor: 32.0, original_max_position_embeddings: 4096, rope_type: 'yarn', truncate: false },
  rope_theta: 150000, router_aux_loss_coef: 0.9, sliding_window: 128, swiglu_limit: 7.0, tie_word_embeddings: false, transformers_version: '4.55.0.dev0',
  use_cache: true, vocab_size: 201088,
};

describe('parseGptOssConfig', () => {
  it('reads gpt-oss-20b and -120b as published into the real-shape constants', () => {
    expect(parseGptOssConfig(REAL_20B)).toEqual({ ...GPT_OSS_20B_CONFIG, dtype: null });
    const l36 = Array.from({ length: 36 }, (_, i) => (i % 2 ? 'full_attention' : 'sliding_attention'));
    expect(parseGptOssConfig({ ...REAL_20B, num_hidden_layers: 36, num_local_experts: 128, layer_types: l36, torch_dtype: 'bfloat16' })).toEqual(GPT_OSS_120B_CONFIG);
    expect(GPT_OSS_20B_CONFIG.slidingWindows.slice(0, 4)).toEqual([128, 0, 128, 0]);
  });

  it('reads the tiny fixture: sliding then full layer, YaRN factor 4 over 64 positions, dense experts', () => {
    expect(parseGptOssConfig(tiny())).toEqual({ ...tinyGptOssConfig(), initializerRange: 0.2, dtype: 'f32' });
  });

  it("applies GptOssConfig's defaults: alternating layers from a sliding one, window 128, 128 experts top-4, limit 7 and alpha 1.702, biases, head_dim 64, the released YaRN", () => {
    const { layer_types: _l, sliding_window: _w, num_local_experts: _e, num_experts_per_tok: _k, experts_per_token: _k2, swiglu_limit: _s, attention_bias: _b, head_dim: _h, rope_scaling: _r, ...rest } = tiny();
    const c = parseGptOssConfig({ ...rest, num_hidden_layers: 3 });
    expect(c).toMatchObject({ slidingWindows: [128, 0, 128], numLocalExperts: 128, numExpertsPerTok: 4, swigluLimit: 7, swigluAlpha: 1.702, attentionBias: true, headDim: 64 });
    expect(c.ropeScaling).toEqual(GPT_OSS_20B_CONFIG.ropeScaling);
    expect(parseGptOssConfig({ ...rest, rope_scaling: null }).ropeScaling).toEqual(GPT_OSS_20B_CONFIG.ropeScaling);
    expect(parseGptOssConfig({ ...rest, rope_scaling: { rope_type: 'default' } }).ropeScaling).toBeNull();
    expect(parseGptOssConfig({ ...rest, swiglu_alpha: 1.5 }).swigluAlpha).toBe(1.5);
  });

  it("reads transformers 5's rope_parameters and HF's YaRN defaults (beta 32 / 1, truncate true, the original length max_position_embeddings)", () => {
    const { rope_scaling: _r, rope_theta: _t, ...rest } = tiny();
    const c = parseGptOssConfig({ ...rest, rope_parameters: { rope_type: 'yarn', factor: 2, rope_theta: 5000 } });
    expect(c.ropeTheta).toBe(5000);
    expect(c.ropeScaling).toEqual({ ropeType: 'yarn', factor: 2, betaFast: 32, betaSlow: 1, originalMaxPositionEmbeddings: 256, truncate: true, attentionFactor: null });
  });

  it.each([
    [{ num_attention_heads: 3 }, 'num_key_value_heads', /num_attention_heads 3 is not a multiple of num_key_value_heads 2 in \/m\/config.json/],
    [{ layer_types: ['sliding_attention'] }, 'layer_types', /layer_types has 1 entries for num_hidden_layers 2/],
    [{ layer_types: ['sliding_attention', 'chunked_attention'] }, 'layer_types.1', /unsupported layer_types\[1\] 'chunked_attention'/],
    [{ sliding_window: 0 }, 'sliding_window', /layer_types\[0\] is sliding_attention but sliding_window is 0/],
    [{ num_experts_per_tok: 9, experts_per_token: 9 }, 'num_experts_per_tok', /num_experts_per_tok 9 exceeds the 8 experts/],
    [{ experts_per_token: 3 }, 'num_experts_per_tok', /num_experts_per_tok 2 and experts_per_token 3 disagree/],
    [{ rope_scaling: { rope_type: 'llama3', factor: 8 } }, 'rope_scaling.rope_type', /unsupported rope_scaling.rope_type 'llama3' in \/m\/config.json: supported for gpt_oss: yarn, default/],
    [{ rope_scaling: { rope_type: 'yarn' } }, 'rope_scaling.factor', /rope_scaling.factor is required/],
    [{ quantization_config: { quant_method: 'fp8' } }, 'quantization_config.quant_method', /unsupported quantization_config.quant_method 'fp8'/],
    [{ hidden_act: 'gelu' }, 'hidden_act', /unsupported hidden_act 'gelu'/],
    [{ hidden_size: -1 }, 'hidden_size', /invalid field hidden_size in \/m\/config.json/],
    [{ torch_dtype: 'int8' }, 'torch_dtype', /unknown dtype 'int8'|unsupported dtype 'int8'/],
    [{ model_type: 'mixtral' }, 'model_type', /unsupported model_type 'mixtral' in \/m\/config.json: supported: gpt_oss/],
  ])('%j is a UserError naming %s', (over, field, message) => {
    const e = userError(() => parseGptOssConfig({ ...tiny(), ...over }, '/m/config.json'));
    expect(e.message).toMatch(message);
    expect(e.details.field).toBe(field);
  });

  it('reads the MXFP4 quantization_config as the experts format', () => {
    expect(parseGptOssConfig({ ...tiny(), quantization_config: { quant_method: 'mxfp4', modules_to_not_convert: [] } }).expertsFormat).toBe('mxfp4');
  });
});
