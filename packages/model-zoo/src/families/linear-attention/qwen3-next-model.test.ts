/**
 * Qwen3-Next end to end on the CPU: the registry resolves HF's config.json to the engine with a hybrid cache layout
 * (paged K/V for the gated-attention layers, conv + delta-rule states for the DeltaNet layers); a seeded random
 * checkpoint in HF's tensor names (per-expert tensors, conv1d [C, 1, W], A_log / dt_bias) loads back by
 * path; greedy generation on the engine's generate path (f32) equals an independent float64 forward of the whole
 * sequence at every step (qwen3-next-reference.ts), token for token.
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
import { SafetensorsFile, writeSafetensors } from '../../weights/safetensors.js';
import type { Qwen3NextForCausalLM } from './L4/qwen3_next.js';
import { initQwen3NextParameters } from './qwen3-next-cases.js';
import { parseQwen3NextConfig } from './qwen3-next-config.js';
import { refQwen3NextGreedy } from './qwen3-next-reference.js';

const FIXTURE = join(import.meta.dirname, '../../../fixtures/tiny-qwen3-next');
const tmp = mkdtempSync(join(tmpdir(), 'fk-qwen3-next-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const raw = JSON.parse(readFileSync(join(FIXTURE, 'config.json'), 'utf8')) as Record<string, unknown>;
const cfg = parseQwen3NextConfig(raw);

describe('Qwen3-Next through the model registry', () => {
  it('resolves Qwen3NextForCausalLM to the engine with attention caches for full-attention layers and two states for DeltaNet layers', () => {
    const r = loadModelConfig(join(FIXTURE, 'config.json'));
    expect(r.architecture.name).toBe('qwen3_next');
    expect(r.architecture.runner).toBe('decoder-llm');
    expect(r.geometry).toMatchObject({ hiddenSize: 32, numHiddenLayers: 4, numAttentionHeads: 4, numKeyValueHeads: 2, headDim: 8, vocabSize: 64 });
    const linear = { kind: 'recurrent', states: [{ name: 'conv', shape: [cfg.convDim, 3], dtype: 'f32' }, { name: 'recurrent', shape: [4, 8, 8], dtype: 'f32' }] };
    expect(r.geometry.layerCaches).toEqual([linear, linear, linear, { kind: 'attention' }]);
  });

  it('a random checkpoint in HF names loads back by path (an mtp.* tensor beside it ignored), and greedy generate equals the float64 forward', () => {
    const dir = join(tmp, 'ckpt');
    const registry = baselineRegistry();
    const w = writeRandomModelCheckpoint(dir, raw, { seed: 5, dtype: 'f32', registry });
    expect(w.architecture).toBe('qwen3_next');
    const file = SafetensorsFile.open(join(dir, 'model.safetensors'));
    const names = new Set(file.tensors.keys());
    file.close();
    const linear = ['in_proj_qkvz.weight', 'in_proj_ba.weight', 'conv1d.weight', 'dt_bias', 'A_log', 'norm.weight', 'out_proj.weight'].map((n) => `linear_attn.${n}`);
    const attn = ['q_proj.weight', 'k_proj.weight', 'v_proj.weight', 'o_proj.weight', 'q_norm.weight', 'k_norm.weight'].map((n) => `self_attn.${n}`);
    const experts = Array.from({ length: 8 }, (_, e) => ['gate_proj', 'up_proj', 'down_proj'].map((p) => `mlp.experts.${e}.${p}.weight`)).flat();
    const sparse = ['mlp.gate.weight', ...experts, 'mlp.shared_expert.gate_proj.weight', 'mlp.shared_expert.up_proj.weight', 'mlp.shared_expert.down_proj.weight', 'mlp.shared_expert_gate.weight'];
    const dense = ['mlp.gate_proj.weight', 'mlp.up_proj.weight', 'mlp.down_proj.weight'];
    const layer = (l: number) => ['input_layernorm.weight', 'post_attention_layernorm.weight', ...(l === 3 ? attn : linear), ...(l === 2 ? dense : sparse)].map((n) => `model.layers.${l}.${n}`);
    const want = ['model.embed_tokens.weight', 'model.norm.weight', 'lm_head.weight', ...[0, 1, 2, 3].flatMap(layer)];
    expect([...names].sort()).toEqual(want.sort());
    const sf = SafetensorsFile.open(join(dir, 'model.safetensors'));
    expect(sf.tensors.get('model.layers.0.linear_attn.conv1d.weight')!.shape).toEqual([cfg.convDim, 1, 4]);
    expect(sf.tensors.get('model.layers.0.linear_attn.in_proj_qkvz.weight')!.shape).toEqual([2 * 16 + 2 * 32, 32]);
    sf.close();

    // the released checkpoints carry a multi-token-prediction head (mtp.*): not built, ignored on load
    writeSafetensors(join(dir, 'mtp.safetensors'), [{ name: 'mtp.fc.weight', dtype: 'f32', shape: [32, 64], bytes: () => new Uint8Array(32 * 64 * 4) }]);
    const loaded = loadModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' });
    expect(loaded.weights).toBe('checkpoint');
    const model = loaded.model as Qwen3NextForCausalLM;
    // HF-scale init (std 0.02) gives near-uniform logits: widen the loaded weights so greedy choices are clear
    initQwen3NextParameters(model, new Rng(8));
    const p = new Map(model.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
    // prompts of assorted lengths, batched on the engine (prefilled together, then batched decodes)
    const rng = new Rng(3);
    const prompts = [[1, 17, 5, 33, 9], [4, 60, 2], Array.from({ length: 21 }, () => rng.int(0, 64))];
    const steps = 7;
    const got = generate(model, loaded.ctx, loaded.geometry, prompts.map((promptIds) => ({ promptIds })), { maxTokens: steps }).outputs.map((o) => o.tokenIds);
    const ref = prompts.map((prompt) => refQwen3NextGreedy(prompt, steps, p, cfg));
    expect(got).toEqual(ref);
    expect(new Set(got.flat()).size, 'the continuations are not one repeated token').toBeGreaterThan(4);
    model.dispose();
  });

  it('bad configs are UserErrors naming the field', () => {
    expect(() => writeRandomModelCheckpoint(join(tmp, 'bad'), { ...raw, linear_num_value_heads: 3 }, { seed: 1, dtype: 'f32', registry: baselineRegistry() })).toThrow(/linear_num_value_heads 3 is not a multiple of linear_num_key_heads 2/);
  });
});
