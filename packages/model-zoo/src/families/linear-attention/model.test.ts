/**
 * GLA end to end on the CPU: the registry resolves FLA's config.json (unsupported fields are UserErrors naming them), a
 * seeded random checkpoint in FLA's tensor names loads back by path, a prefill then decode steps with the state carried
 * equals one prefill of the whole sequence (also with the prefill in chunks that switch between the chunked and the
 * recurrent kernel), and greedy generation (on the engine's generate path, the state in its pool) equals an independent
 * float64 forward of the same weights.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng, toHostArray, withContext, type ExecutionContext, type Tensor } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { fromInts } from '../../common/inputs.js';
import { generate } from '../../engine/generate.js';
import { greedyGenerateRecurrent } from '../../engine/recurrent-generate.js';
import { baselineRegistry } from '../../index.js';
import { loadModel, loadModelConfig, writeRandomModelCheckpoint } from '../../models/load-model.js';
import { SafetensorsFile } from '../../weights/safetensors.js';
import { initGlaParameters } from './cases.js';
import type { GLACausalLM } from './causal-lm.js';
import { GLA_2_7B, parseGlaConfig, type GlaConfig } from './config.js';
import type { GLAForCausalLM } from './L4/gla.js';
import { refGlaModel } from './reference.js';

const FIXTURE = join(import.meta.dirname, '../../../fixtures/tiny-gla');
const tmp = mkdtempSync(join(tmpdir(), 'fk-gla-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const raw = JSON.parse(readFileSync(join(FIXTURE, 'config.json'), 'utf8')) as Record<string, unknown>;
const cfg: GlaConfig = parseGlaConfig(raw);

function build(seed: number): { model: GLAForCausalLM; ctx: ExecutionContext } {
  const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype: 'f32', registry: baselineRegistry() };
  const model = ctx.registry.createIn<GLAForCausalLM>(ctx, 'L4/gla', cfg);
  initGlaParameters(model, new Rng(seed));
  return { model, ctx };
}

const hostParams = (m: GLAForCausalLM | GLACausalLM) => new Map(m.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));

/** forward on ids [1, n] with a state; the logits as float64 and the new state (the caller disposes it). */
function run(model: GLAForCausalLM, ctx: ExecutionContext, tokens: number[], state: Tensor | null): { logits: Float64Array; state: Tensor } {
  return withContext(ctx, () => {
    const t = fromInts(ctx, tokens, [1, tokens.length], 'i64');
    const [logits, next] = model.forward(t, state) as [Tensor, Tensor];
    t.dispose();
    const out = logits.toFloat64Array();
    logits.dispose();
    return { logits: out, state: next };
  });
}

function expectClose(a: Float64Array, b: Float64Array, tol: number, what: string): void {
  expect(a.length, what).toBe(b.length);
  let worst = 0;
  a.forEach((v, i) => (worst = Math.max(worst, Math.abs(v - b[i]!) / (1 + Math.abs(b[i]!)))));
  expect(worst, what).toBeLessThan(tol);
}

describe('GLA config', () => {
  it('fla-hub/gla-2.7B-100B: 5 heads of K 256 / V 512, MLP 6912, 32 layers', () => {
    expect(GLA_2_7B).toMatchObject({ hiddenSize: 2560, numHeads: 5, headKDim: 256, headVDim: 512, keyDim: 1280, valueDim: 2560, intermediateSize: 6912, numHiddenLayers: 32, vocabSize: 32000 });
  });

  it('options the family does not implement are UserErrors naming the field and the fix', () => {
    const bad = (over: Record<string, unknown>) => () => parseGlaConfig({ ...raw, ...over }, 'x/config.json');
    expect(bad({ use_short_conv: true })).toThrow(/unsupported use_short_conv true in x\/config.json/);
    expect(bad({ num_kv_heads: 1 })).toThrow(/unsupported num_kv_heads 1/);
    expect(bad({ attn: { layers: [1], num_heads: 2 } })).toThrow(/unsupported attn/);
    expect(bad({ hidden_size: 30 })).toThrow(/hidden_size \* expand_k = 15 is not a positive multiple of num_heads 2/);
    expect(bad({ num_heads: 'two' })).toThrow(/invalid field num_heads in x\/config.json/);
  });
});

describe('GLA through the model registry', () => {
  it('resolves GLAForCausalLM to the engine (decoder-llm) with a recurrent state per layer and no attention layer', () => {
    const r = loadModelConfig(join(FIXTURE, 'config.json'));
    expect(r.architecture.name).toBe('gla');
    expect(r.architecture.runner).toBe('decoder-llm');
    expect(r.geometry).toMatchObject({ hiddenSize: 32, numHiddenLayers: 2, numAttentionHeads: 2, vocabSize: 64 });
    expect(r.geometry.layerCaches).toEqual([0, 1].map(() => ({ kind: 'recurrent', states: [{ name: 'recurrent', shape: [cfg.numHeads, cfg.headKDim, cfg.headVDim], dtype: 'f32' }] })));
  });

  it('a random checkpoint in FLA names loads back by path, and generates what the float64 reference does with its tensors', () => {
    const dir = join(tmp, 'ckpt');
    const registry = baselineRegistry();
    const w = writeRandomModelCheckpoint(dir, raw, { seed: 5, dtype: 'f32', registry });
    expect(w.architecture).toBe('gla');
    const file = SafetensorsFile.open(join(dir, 'model.safetensors'));
    const names = [...file.tensors.keys()].sort();
    file.close();
    const layer = ['attn_norm.weight', 'attn.q_proj.weight', 'attn.k_proj.weight', 'attn.v_proj.weight', 'attn.g_proj.weight', 'attn.gk_proj.0.weight', 'attn.gk_proj.1.weight', 'attn.gk_proj.1.bias', 'attn.g_norm_swish_gate.weight', 'attn.o_proj.weight', 'mlp_norm.weight', 'mlp.gate_proj.weight', 'mlp.up_proj.weight', 'mlp.down_proj.weight'];
    const want = ['model.embeddings.weight', 'model.norm.weight', 'lm_head.weight', ...[0, 1].flatMap((l) => layer.map((n) => `model.layers.${l}.${n}`))].sort();
    expect(names).toEqual(want);

    const loaded = loadModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' });
    expect(loaded.weights).toBe('checkpoint');
    const model = loaded.model as GLACausalLM;
    // HF-scale init (std 0.02) gives near-uniform logits: widen the loaded weights so greedy choices are clear
    initGlaParameters(model, new Rng(8));
    const prompts = [[1, 17, 5, 33, 9], [4, 60, 2]];
    // the engine's one-batch loop: both prompts prefilled together, then batched decodes, states in the pool
    const got = generate(model, loaded.ctx, loaded.geometry, prompts.map((promptIds) => ({ promptIds })), { maxTokens: 8 }).outputs.map((o) => o.tokenIds);
    const p = hostParams(model);
    const want2 = prompts.map((prompt) => {
      const seq = [...prompt];
      const out: number[] = [];
      for (let i = 0; i < 8; i++) {
        const { logits } = refGlaModel(seq, 1, seq.length, null, p, cfg);
        const last = logits.subarray((seq.length - 1) * cfg.vocabSize);
        const tok = last.reduce((b, v, j) => (v > last[b]! ? j : b), 0);
        out.push(tok);
        seq.push(tok);
      }
      return out;
    });
    expect(got).toEqual(want2);
    expect(new Set(got[0]).size, 'the continuation is not one repeated token').toBeGreaterThan(2);
    model.dispose();
  });
});

describe('the recurrent state carries the sequence', () => {
  const seq = Array.from({ length: 75 }, (_, i) => (i * 37 + 11) % 64);

  it('prefill then decode steps = one prefill of the whole sequence (logits at every position, final state)', () => {
    const { model, ctx } = build(21);
    const whole = run(model, ctx, seq, null); // 75 > 64 tokens: the chunked kernel
    const V = cfg.vocabSize;
    const P = 70;
    let { logits, state } = run(model, ctx, seq.slice(0, P), null);
    expectClose(logits, whole.logits.subarray(0, P * V), 1e-6, 'prefill logits');
    for (let t = P; t < seq.length; t++) {
      const next = run(model, ctx, [seq[t]!], state);
      state.dispose();
      ({ logits, state } = next);
      expectClose(logits, whole.logits.subarray(t * V, (t + 1) * V), 1e-6, `decode step ${t}`);
    }
    expectClose(state.toFloat64Array(), whole.state.toFloat64Array(), 1e-6, 'final state');
    // and the float64 reference agrees with the whole prefill
    const ref = refGlaModel(seq, 1, seq.length, null, hostParams(model), cfg);
    expectClose(whole.logits, ref.logits, 1e-6, 'reference logits');
    expectClose(whole.state.toFloat64Array(), ref.state, 1e-6, 'reference state');
    for (const t of [state, whole.state]) t.dispose();
    model.dispose();
  });

  it('a chunked prefill (66 tokens: chunked kernel, then 9: recurrent kernel) then greedy decode = the unchunked run', () => {
    const { model, ctx } = build(22);
    const prompt = seq.slice(0, 75);
    const a = greedyGenerateRecurrent(model, ctx, prompt, 6);
    const b = greedyGenerateRecurrent(model, ctx, prompt, 6, { prefillChunk: 66 });
    const c = greedyGenerateRecurrent(model, ctx, prompt, 6, { prefillChunk: 7 });
    expect(new Set(a).size).toBeGreaterThan(1);
    expect(b).toEqual(a);
    expect(c).toEqual(a);
    // the decode path really depends on the state: a different prefix changes the continuation's logits
    const x = run(model, ctx, [3, 4, 5], null);
    const y = run(model, ctx, [9, 4, 5], null);
    expect(Math.max(...x.logits.subarray(2 * 64).map((v, i) => Math.abs(v - y.logits[2 * 64 + i]!)))).toBeGreaterThan(1e-3);
    for (const t of [x.state, y.state]) t.dispose();
    model.dispose();
  });
});
