/**
 * Kimi-Linear end to end on the CPU: the registry resolves the remote-code config.json (KimiLinearForCausalLM) to the
 * engine with a hybrid cache layout (paged K/V for the MLA layers, three conv states + the KDA state for KDA layers); a
 * seeded random checkpoint in HF's tensor names (per-expert w1 / w2 / w3, the gate's e_score_correction_bias, q/k/v_conv1d
 * [C, 1, W], A_log [1, 1, H, 1]) loads back by path; greedy generation on the engine's generate path (f32) equals an
 * independent float64 forward of the whole sequence at every step (kimi-linear-reference.ts), token for token.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng, toHostArray } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { generate } from '../../engine/generate.js';
import { baselineRegistry } from '../../index.js';
import { loadModel, loadModelConfig, writeRandomModelCheckpoint } from '../../models/load-model.js';
import { SafetensorsFile } from '../../weights/safetensors.js';
import type { KimiLinearForCausalLM } from './L4/kimi_linear.js';
import { initKimiParameters } from './kimi-linear-cases.js';
import { parseKimiLinearConfig } from './kimi-linear-config.js';
import { refKimiLinearGreedy } from './kimi-linear-reference.js';

const FIXTURE = join(import.meta.dirname, '../../../fixtures/tiny-kimi-linear');
const tmp = mkdtempSync(join(tmpdir(), 'fk-kimi-linear-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const raw = JSON.parse(readFileSync(join(FIXTURE, 'config.json'), 'utf8')) as Record<string, unknown>;
const cfg = parseKimiLinearConfig(raw);

describe('Kimi-Linear through the model registry', () => {
  it('registers the original task ids at their levels', () => {
    const tasks = new Map(baselineRegistry().allTasks().map((t) => [t.id, t] as const));
    for (const [id, cls] of [['L2/kimi_delta_attention', 'KimiDeltaAttention'], ['L2/kimi_mla_attention', 'KimiMLAAttention'], ['L2/kimi_moe', 'KimiMoE'], ['L3/kimi_linear_decoder', 'KimiLinearDecoderLayer'], ['L4/kimi_linear', 'KimiLinearForCausalLM']] as const) {
      expect(tasks.get(id)?.className, id).toBe(cls);
      expect(tasks.get(id)?.architectures).toEqual(['kimi_linear']);
    }
  });

  it('resolves KimiLinearForCausalLM to the engine: a latent cache of MLA rows, four states per KDA layer', () => {
    const r = loadModelConfig(join(FIXTURE, 'config.json'));
    expect(r.architecture.name).toBe('kimi_linear');
    expect(r.architecture.runner).toBe('decoder-llm');
    expect(r.geometry).toMatchObject({ hiddenSize: 32, numHiddenLayers: 4, numAttentionHeads: 4, numKeyValueHeads: 1, headDim: 16 + 4, vocabSize: 64 });
    const conv = { shape: [16, 3], dtype: 'f32' };
    const kda = { kind: 'recurrent', states: [{ name: 'q_conv', ...conv }, { name: 'k_conv', ...conv }, { name: 'v_conv', ...conv }, { name: 'recurrent', shape: [2, 8, 8], dtype: 'f32' }] };
    expect(r.geometry.layerCaches).toEqual([kda, kda, { kind: 'latent' }, kda]);
  });

  it('a random checkpoint in HF names loads back by path, and greedy generate equals the float64 forward', () => {
    const dir = join(tmp, 'ckpt');
    const registry = baselineRegistry();
    const w = writeRandomModelCheckpoint(dir, raw, { seed: 5, dtype: 'f32', registry });
    expect(w.architecture).toBe('kimi_linear');
    const file = SafetensorsFile.open(join(dir, 'model.safetensors'));
    const names = new Set(file.tensors.keys());
    const shape = (n: string) => file.tensors.get(n)!.shape;
    expect(shape('model.layers.0.self_attn.q_conv1d.weight')).toEqual([16, 1, 4]);
    expect(shape('model.layers.0.self_attn.A_log')).toEqual([1, 1, 2, 1]);
    expect(shape('model.layers.0.self_attn.dt_bias')).toEqual([16]);
    expect(shape('model.layers.2.self_attn.kv_a_proj_with_mqa.weight')).toEqual([16 + 4, 32]);
    expect(shape('model.layers.2.self_attn.kv_b_proj.weight')).toEqual([4 * (8 + 8), 16]);
    expect(shape('model.layers.1.block_sparse_moe.experts.7.w1.weight')).toEqual([16, 32]);
    expect(shape('model.layers.1.block_sparse_moe.gate.e_score_correction_bias')).toEqual([8]);
    file.close();
    const kda = ['q_proj', 'k_proj', 'v_proj', 'q_conv1d', 'k_conv1d', 'v_conv1d', 'f_a_proj', 'f_b_proj', 'b_proj', 'g_a_proj', 'g_b_proj', 'o_norm', 'o_proj'].map((n) => `self_attn.${n}.weight`).concat(['self_attn.A_log', 'self_attn.dt_bias']);
    const mla = ['q_proj', 'kv_a_proj_with_mqa', 'kv_a_layernorm', 'kv_b_proj', 'o_proj'].map((n) => `self_attn.${n}.weight`);
    const experts = Array.from({ length: 8 }, (_, e) => ['w1', 'w2', 'w3'].map((p) => `block_sparse_moe.experts.${e}.${p}.weight`)).flat();
    const sparse = ['block_sparse_moe.gate.weight', 'block_sparse_moe.gate.e_score_correction_bias', ...experts, ...['gate_proj', 'up_proj', 'down_proj'].map((p) => `block_sparse_moe.shared_experts.${p}.weight`)];
    const dense = ['mlp.gate_proj.weight', 'mlp.up_proj.weight', 'mlp.down_proj.weight'];
    const layer = (l: number) => ['input_layernorm.weight', 'post_attention_layernorm.weight', ...(l === 2 ? mla : kda), ...(l === 0 ? dense : sparse)].map((n) => `model.layers.${l}.${n}`);
    expect([...names].sort()).toEqual(['model.embed_tokens.weight', 'model.norm.weight', 'lm_head.weight', ...[0, 1, 2, 3].flatMap(layer)].sort());

    const loaded = loadModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' });
    expect(loaded.weights).toBe('checkpoint');
    const model = loaded.model as KimiLinearForCausalLM;
    // the loaded checkpoint's correction bias reached the block (read from ...gate.e_score_correction_bias)
    const bias = toHostArray(model.model.layers[1]!.feedForward.namedParameters().find(([n]) => n === 'e_score_correction_bias')![1]);
    const sf = SafetensorsFile.open(join(dir, 'model.safetensors'));
    const bytes = new Uint8Array(8 * 4);
    sf.stream('model.layers.1.block_sparse_moe.gate.e_score_correction_bias', (b, off) => bytes.set(b, off));
    sf.close();
    expect(Array.from(bias.data)).toEqual(Array.from(new Float32Array(bytes.buffer)));
    expect(new Set(bias.data).size).toBe(8);
    // HF-scale init (std 0.02) gives near-uniform logits: widen the loaded weights so greedy choices are clear
    initKimiParameters(model, new Rng(8));
    const p = new Map(model.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
    // prompts of assorted lengths, batched on the engine (prefilled together, then batched decodes)
    const rng = new Rng(3);
    const prompts = [[1, 17, 5, 33, 9], [4, 60, 2], Array.from({ length: 21 }, () => rng.int(0, 64))];
    const steps = 7;
    const got = generate(model, loaded.ctx, loaded.geometry, prompts.map((promptIds) => ({ promptIds })), { maxTokens: steps }).outputs.map((o) => o.tokenIds);
    const ref = prompts.map((prompt) => refKimiLinearGreedy(prompt, steps, p, cfg));
    expect(got).toEqual(ref);
    expect(new Set(got.flat()).size, 'the continuations are not one repeated token').toBeGreaterThan(4);
    model.dispose();
  });

  it('loads at bf16 with A_log, dt_bias and the correction bias kept f32, and generates', () => {
    const dir = join(tmp, 'ckpt-bf16');
    const registry = baselineRegistry();
    writeRandomModelCheckpoint(dir, raw, { seed: 6, dtype: 'bf16', registry });
    const loaded = loadModel(dir, { backend: cpuBackend(), registry, dtype: 'bf16' });
    const model = loaded.model as KimiLinearForCausalLM;
    const dtypes = new Map(model.namedParameters().map(([n, t]) => [n, t.dtype] as const));
    expect(dtypes.get('model.layers.0.self_attn.A_log')).toBe('f32');
    expect(dtypes.get('model.layers.0.self_attn.dt_bias')).toBe('f32');
    expect(dtypes.get('model.layers.1.block_sparse_moe.e_score_correction_bias')).toBe('f32');
    expect(dtypes.get('model.layers.0.self_attn.q_proj.weight')).toBe('bf16');
    const out = generate(model, loaded.ctx, loaded.geometry, [{ promptIds: [3, 9, 27, 81 % 64] }, { promptIds: [5] }], { maxTokens: 4 }).outputs;
    expect(out.map((o) => o.tokenIds.length)).toEqual([4, 4]);
    expect(out.flatMap((o) => o.tokenIds).every((t) => t >= 0 && t < 64)).toBe(true);
    model.dispose();
  });

  it('bad configs are UserErrors naming the field', () => {
    expect(() => writeRandomModelCheckpoint(join(tmp, 'bad'), { ...raw, q_lora_rank: 8 }, { seed: 1, dtype: 'f32', registry: baselineRegistry() })).toThrow(/unsupported q_lora_rank 8 in .*config.json/);
  });
});
