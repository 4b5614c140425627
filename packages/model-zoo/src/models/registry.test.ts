/**
 * The model registry: resolution by HF architectures / model_type, the error for an unknown one, and a toy
 * architecture registered from a test fixture folder (test/fixtures/toy-decoder: its own config schema, parameter and
 * checkpoint names) running generate on the CPU backend through the generic path alone. Its logits are checked against
 * the Llama family (itself checked against a float64 HF-style oracle in generate.test.ts) on the same tensors saved
 * under Llama's names: the toy is a pre-norm RoPE / GQA / SwiGLU decoder, so the two must agree.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { toyArchitecture, type ToyConfig } from '../../test/fixtures/toy-decoder/architecture.js';
import { userError } from '../../test/user-error.js';
import { generate } from '../engine/generate.js';
import { baselineRegistry } from '../index.js';
import { SafetensorsFile, writeSafetensors } from '../weights/safetensors.js';
import { loadModel, loadModelConfig, modelRegistry, writeRandomModelCheckpoint } from './load-model.js';
import { ModelRegistry } from './registry.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');
const TOY = join(import.meta.dirname, '../../test/fixtures/toy-decoder');
const tmp = mkdtempSync(join(tmpdir(), 'fk-models-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('the model registry', () => {
  it('resolves by architectures first, then model_type', () => {
    expect(modelRegistry.resolve({ architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2' }).name).toBe('llama');
    expect(modelRegistry.resolve({ model_type: 'mistral' }).name).toBe('llama');
    expect(modelRegistry.resolve({ architectures: ['SomethingElse', 'LlamaForCausalLM'] }).name).toBe('llama');
    const r = loadModelConfig(join(FIXTURES, 'tiny-qwen2', 'config.json'));
    expect(r.architecture.runner).toBe('decoder-llm');
    expect(r.geometry).toMatchObject({ vocabSize: 256, hiddenSize: 64, numHiddenLayers: 2 });
  });

  it('an unknown architecture is a UserError naming the file and listing the registered ones', () => {
    const e = userError(() => loadModelConfig(join(TOY, 'config.json')));
    expect(e.message).toBe(`no registered model reads architectures [ToyDecoderForCausalLM] and model_type 'toy-decoder' in ${join(TOY, 'config.json')}`);
    expect(e.details.field).toBe('architectures');
    expect(e.details.fix).toMatch(/registered: llama \(LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, model_type llama, model_type qwen2, model_type mistral\)/);
    expect(userError(() => modelRegistry.resolve({ architectures: 'x' }, 'c.json')).message).toMatch(/invalid field architectures in c.json/);
  });

  it('a child registry adds an architecture without touching the shipped one; a claimed name is refused', () => {
    const models = modelRegistry.child().register(toyArchitecture);
    expect(models.resolve({ model_type: 'toy-decoder' }).name).toBe('toy-decoder');
    expect(() => modelRegistry.resolve({ model_type: 'toy-decoder' })).toThrow(/no registered model/);
    expect(() => new ModelRegistry([toyArchitecture, { ...toyArchitecture, name: 'again', architectures: [] }])).toThrow(/again claims model_type toy-decoder, which toy-decoder has/);
  });
});

/** The toy's checkpoint saved again under Llama's names, with the equivalent Llama config.json. */
function asLlama(toyDir: string, cfg: ToyConfig, out: string): void {
  const names: [RegExp, string][] = [
    [/^embed\.weight$/, 'model.embed_tokens.weight'],
    [/^blocks\.(\d+)\.norm1\.weight$/, 'model.layers.$1.input_layernorm.weight'],
    [/^blocks\.(\d+)\.norm2\.weight$/, 'model.layers.$1.post_attention_layernorm.weight'],
    [/^blocks\.(\d+)\.attn\.w([qkvo])\.weight$/, 'model.layers.$1.self_attn.$2_proj.weight'],
    [/^blocks\.(\d+)\.ffn\.w1\.weight$/, 'model.layers.$1.mlp.gate_proj.weight'],
    [/^blocks\.(\d+)\.ffn\.w2\.weight$/, 'model.layers.$1.mlp.up_proj.weight'],
    [/^blocks\.(\d+)\.ffn\.w3\.weight$/, 'model.layers.$1.mlp.down_proj.weight'],
    [/^final_norm\.weight$/, 'model.norm.weight'],
    [/^output\.weight$/, 'lm_head.weight'],
  ];
  const f = SafetensorsFile.open(join(toyDir, 'model.safetensors'));
  mkdirSync(out, { recursive: true });
  const rename = (n: string) => {
    const hit = names.find(([r]) => r.test(n));
    if (!hit) throw new Error(`no Llama name for ${n}`);
    return n.replace(hit[0], hit[1]);
  };
  writeSafetensors(join(out, 'model.safetensors'), [...f.tensors.values()].map((t) => ({ name: rename(t.name), dtype: t.dtype!, shape: t.shape, bytes: () => f.readBytes(t.name) })));
  f.close();
  const llama = {
    architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: cfg.d_model, intermediate_size: cfg.d_ff, num_hidden_layers: cfg.n_layers,
    num_attention_heads: cfg.n_heads, num_key_value_heads: cfg.n_kv_heads, vocab_size: cfg.vocab, max_position_embeddings: cfg.context,
    rms_norm_eps: cfg.norm_eps, rope_theta: cfg.rope_base, tie_word_embeddings: false, hidden_act: 'silu', torch_dtype: 'float32',
  };
  writeFileSync(join(out, 'config.json'), JSON.stringify(llama));
}

describe('a toy architecture from a fixture folder, registered through the model registry alone', () => {
  const models = modelRegistry.child().register(toyArchitecture);
  const raw = JSON.parse(readFileSync(join(TOY, 'config.json'), 'utf8')) as Record<string, unknown>;
  const dir = join(tmp, 'toy');
  const prompts = [[3, 17, 60, 2, 91], [5], [44, 44, 8, 1, 0, 77, 12, 30, 9]];

  it('init-weights writes its checkpoint in its own names (stacked and renamed parameters split back)', () => {
    const w = writeRandomModelCheckpoint(dir, raw, { registry: baselineRegistry(), models, seed: 4, dtype: 'f32', configPath: join(TOY, 'config.json') });
    expect(w.architecture).toBe('toy-decoder');
    const f = SafetensorsFile.open(join(dir, 'model.safetensors'));
    const names = [...f.tensors.keys()].sort();
    f.close();
    expect(names.filter((n) => n.startsWith('blocks.0.'))).toEqual([
      'blocks.0.attn.wk.weight', 'blocks.0.attn.wo.weight', 'blocks.0.attn.wq.weight', 'blocks.0.attn.wv.weight',
      'blocks.0.ffn.w1.weight', 'blocks.0.ffn.w2.weight', 'blocks.0.ffn.w3.weight', 'blocks.0.norm1.weight', 'blocks.0.norm2.weight',
    ]);
    expect(names.length).toBe(2 + 2 * 9 + 1);
    expect(names).toContain('output.weight');
  });

  it('generate runs on it (CPU backend) and matches the Llama family on the same tensors', () => {
    const toy = loadModel(dir, { backend: cpuBackend(), registry: baselineRegistry(), models, dtype: 'f32' });
    expect(toy.architecture.name).toBe('toy-decoder');
    expect(toy.weights).toBe('checkpoint');
    expect(toy.geometry).toMatchObject({ vocabSize: 96, numHiddenLayers: 2, numKeyValueHeads: 2, headDim: 8 });
    const cfg = toy.config as ToyConfig;
    const llamaDir = join(tmp, 'toy-as-llama');
    asLlama(dir, cfg, llamaDir);
    const llama = loadModel(llamaDir, { backend: cpuBackend(), registry: baselineRegistry() });
    const reqs = prompts.map((p) => ({ promptIds: p }));
    const a = generate(toy.model, toy.ctx, toy.geometry, reqs, { maxTokens: 6, collectLogits: true });
    const b = generate(llama.model, llama.ctx, llama.geometry, reqs, { maxTokens: 6, collectLogits: true });
    let worst = 0;
    a.outputs.forEach((o, s) => {
      expect(o.tokenIds).toEqual(b.outputs[s]!.tokenIds);
      o.logits!.forEach((row, t) => row.forEach((x, j) => (worst = Math.max(worst, Math.abs(x - b.outputs[s]!.logits![t]![j]!)))));
    });
    expect(worst).toBeLessThan(1e-5);
    // not a degenerate model
    expect(new Set(a.outputs.flatMap((o) => o.tokenIds)).size).toBeGreaterThan(3);
    toy.model.dispose();
    llama.model.dispose();
  });

  it('config.json alone gives the same seeded model (random init walks the same parameter plan)', () => {
    const fromFile = loadModel(dir, { backend: cpuBackend(), registry: baselineRegistry(), models, dtype: 'f32' });
    const random = loadModel(TOY, { backend: cpuBackend(), registry: baselineRegistry(), models, dtype: 'f32', initSeed: 4 });
    expect(random.weights).toBe('random');
    const want = new Map(fromFile.model.namedParameters());
    for (const [k, p] of random.model.namedParameters()) expect([...p.toFloat64Array()], k).toEqual([...want.get(k)!.toFloat64Array()]);
    fromFile.model.dispose();
    random.model.dispose();
  });

  it('a checkpoint that does not fit is one error listing every missing, mis-shaped and unexpected tensor', () => {
    const bad = join(tmp, 'toy-bad');
    const f = SafetensorsFile.open(join(dir, 'model.safetensors'));
    mkdirSync(bad, { recursive: true });
    writeFileSync(join(bad, 'config.json'), JSON.stringify(raw));
    const entries = [...f.tensors.values()]
      .filter((t) => t.name !== 'blocks.1.attn.wk.weight' && t.name !== 'output.weight')
      .map((t) => (t.name === 'final_norm.weight' ? { name: t.name, dtype: 'f32' as const, shape: [16], bytes: () => new Uint8Array(64) } : { name: t.name, dtype: t.dtype!, shape: t.shape, bytes: () => f.readBytes(t.name) }));
    entries.push({ name: 'blocks.2.norm1.weight', dtype: 'f32', shape: [32], bytes: () => new Uint8Array(128) });
    writeSafetensors(join(bad, 'model.safetensors'), entries);
    f.close();
    const e = userError(() => loadModel(bad, { backend: cpuBackend(), registry: baselineRegistry(), models, dtype: 'f32' }));
    expect(e.message.split('\n')).toEqual([
      `checkpoint ${bad} does not match the toy-decoder config (4 problems):`,
      `  missing tensor 'blocks.1.attn.wk.weight' ([16, 32], for blocks.1.attn.qkv_proj.weight)`,
      `  tensor 'final_norm.weight' in ${join(bad, 'model.safetensors')} has shape [16], expected [32] from the config`,
      `  missing tensor 'output.weight' ([96, 32], for output.weight)`,
      `  unused by the model: 'blocks.2.norm1.weight'`,
    ]);
    expect(e.details.field).toBe('blocks.1.attn.wk.weight');
  });
});
