import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseLlamaConfig } from './config.js';
import { userError } from '../../../test/user-error.js';

const FIXTURES = join(import.meta.dirname, '../../../fixtures');
const fixture = (name: string) => JSON.parse(readFileSync(join(FIXTURES, name, 'config.json'), 'utf8')) as Record<string, unknown>;

describe('parseLlamaConfig', () => {
  it('reads the three fixtures with their variants', () => {
    const llama = parseLlamaConfig(fixture('tiny-llama'));
    expect(llama).toMatchObject({ modelType: 'llama', headDim: 16, numKeyValueHeads: 2, qkvBias: false, tieWordEmbeddings: false, dtype: 'f32' });
    expect(llama.ropeScaling).toEqual({ ropeType: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 64 });
    const qwen = parseLlamaConfig(fixture('tiny-qwen2'));
    expect(qwen).toMatchObject({ modelType: 'qwen2', headDim: 16, qkvBias: true, oProjBias: false, tieWordEmbeddings: true, ropeTheta: 1e6, slidingWindows: [0, 0] });
    const mistral = parseLlamaConfig(fixture('tiny-mistral'));
    expect(mistral.slidingWindows).toEqual([8, 8]);
  });

  it('defaults: kv heads = heads, head_dim = hidden / heads, llama attention_bias on q/k/v and o', () => {
    const c = parseLlamaConfig({ model_type: 'llama', hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, num_attention_heads: 4, vocab_size: 10, attention_bias: true });
    expect(c).toMatchObject({ numKeyValueHeads: 4, headDim: 8, qkvBias: true, oProjBias: true, ropeTheta: 10000, ropeScaling: null, dtype: null });
  });

  it('reads transformers 5 rope_parameters, linear scaling, and qwen2 per-layer sliding windows', () => {
    const base = { model_type: 'qwen2', hidden_size: 32, intermediate_size: 64, num_hidden_layers: 4, num_attention_heads: 4, vocab_size: 10 };
    const c = parseLlamaConfig({ ...base, rope_parameters: { rope_type: 'linear', factor: 4, rope_theta: 5000 }, use_sliding_window: true, sliding_window: 16, max_window_layers: 2 });
    expect(c.ropeTheta).toBe(5000);
    expect(c.ropeScaling).toEqual({ ropeType: 'linear', factor: 4 });
    expect(c.slidingWindows).toEqual([0, 0, 16, 16]);
    expect(parseLlamaConfig({ ...base, rope_parameters: { rope_type: 'default', rope_theta: 7 } }).ropeScaling).toBeNull();
  });

  it('unsupported model_type names the value, the file and what is supported', () => {
    const e = userError(() => parseLlamaConfig({ ...fixture('tiny-llama'), model_type: 'gpt2' }, '/m/config.json'));
    expect(e.message).toBe("unsupported model_type 'gpt2' in /m/config.json: supported: llama, qwen2, mistral");
    expect(e.details.field).toBe('model_type');
  });

  it("unsupported rope_scaling type 'yarn'", () => {
    const e = userError(() => parseLlamaConfig({ ...fixture('tiny-llama'), rope_scaling: { rope_type: 'yarn', factor: 4 } }, '/m/config.json'));
    expect(e.message).toBe("unsupported rope_scaling.rope_type 'yarn' in /m/config.json: supported: llama3, linear");
    // transformers 4's older key `type` too
    expect(() => parseLlamaConfig({ ...fixture('tiny-llama'), rope_scaling: { type: 'dynamic', factor: 2 } })).toThrow(/unsupported rope_scaling.rope_type 'dynamic'/);
  });

  it('missing or mistyped fields, hidden_act, heads that do not divide, unknown dtype', () => {
    const { hidden_size: _h, ...noHidden } = fixture('tiny-llama');
    expect(userError(() => parseLlamaConfig(noHidden, 'c.json')).message).toMatch(/invalid field hidden_size in c.json/);
    expect(userError(() => parseLlamaConfig({ ...fixture('tiny-llama'), num_hidden_layers: 'two' })).details.field).toBe('num_hidden_layers');
    expect(userError(() => parseLlamaConfig({ ...fixture('tiny-llama'), hidden_act: 'gelu' })).message).toMatch(/unsupported hidden_act 'gelu'/);
    expect(userError(() => parseLlamaConfig({ ...fixture('tiny-llama'), num_key_value_heads: 3 })).message).toMatch(/not a multiple of num_key_value_heads 3/);
    expect(userError(() => parseLlamaConfig({ ...fixture('tiny-llama'), torch_dtype: 'int4' })).message).toMatch(/unknown dtype 'int4'/);
    expect(userError(() => parseLlamaConfig({ ...fixture('tiny-llama'), rope_scaling: { rope_type: 'llama3', factor: 8 } })).message).toMatch(/rope_scaling.low_freq_factor is required/);
  });
});
