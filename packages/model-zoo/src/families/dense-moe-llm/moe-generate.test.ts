/**
 * Mixtral and Qwen3-MoE end to end on the CPU backend: the model registry resolves the fixture configs, init-weights
 * writes a seeded checkpoint in HF's names (per-expert w1/w2/w3 or gate/up/down_proj, separate q/k/v), loadModel
 * stacks them back, and greedy generate through the engine is checked step by step against an independent float64
 * forward written here over the checkpoint's own tensors by their HF names (separate projections, a loop over each
 * token's top-k experts, HF's softmax -> top-k -> renormalise routing).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { elementAccessor, parseDType } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { generate } from '../../engine/generate.js';
import { baselineRegistry } from '../../index.js';
import { loadModel, loadModelConfig, writeRandomModelCheckpoint } from '../../models/load-model.js';
import { SafetensorsFile, writeSafetensors } from '../../weights/safetensors.js';
import { userError } from '../../../test/user-error.js';
import { oracleLinear, oracleRmsNorm } from '../../../test/float64-oracle.js';

const FIXTURES = join(import.meta.dirname, '../../../fixtures');
const tmp = mkdtempSync(join(tmpdir(), 'fk-moe-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

type W = Map<string, { shape: number[]; data: Float64Array }>;

function readAll(file: string): W {
  const f = SafetensorsFile.open(file);
  const out: W = new Map();
  for (const [name, info] of f.tensors) {
    const acc = elementAccessor(parseDType(info.stDType), f.readBytes(name));
    const a = new Float64Array(info.shape.reduce((x, y) => x * y, 1));
    for (let i = 0; i < a.length; i++) a[i] = acc.get(i);
    out.set(name, { shape: [...info.shape], data: a });
  }
  f.close();
  return out;
}

/** HF's rotate_half RoPE on [L, heads, D] at positions 0..L-1. */
function rope(x: Float64Array, L: number, heads: number, D: number, theta: number): void {
  const half = D / 2;
  for (let p = 0; p < L; p++) for (let h = 0; h < heads; h++) for (let i = 0; i < half; i++) {
    const a = p / Math.pow(theta, (2 * i) / D);
    const o = (p * heads + h) * D;
    const [x1, x2] = [x[o + i]!, x[o + half + i]!];
    x[o + i] = x1 * Math.cos(a) - x2 * Math.sin(a);
    x[o + half + i] = x2 * Math.cos(a) + x1 * Math.sin(a);
  }
}

/** Logits of the last token of `ids` by the HF modeling code's math, in float64. */
function oracleLogits(cfg: Record<string, any>, w: W, ids: number[]): number[] {
  const mixtral = cfg.model_type === 'mixtral';
  const H: number = cfg.hidden_size;
  const nq: number = cfg.num_attention_heads;
  const nk: number = cfg.num_key_value_heads;
  const D: number = cfg.head_dim ?? H / nq;
  const eps: number = cfg.rms_norm_eps;
  const K: number = cfg.num_experts_per_tok;
  const E: number = mixtral ? cfg.num_local_experts : cfg.num_experts;
  const renorm = mixtral ? true : cfg.norm_topk_prob;
  const L = ids.length;
  const t = (n: string) => {
    const v = w.get(n);
    if (!v) throw new Error(`oracle: no tensor ${n}`);
    return v;
  };
  let h = new Float64Array(L * H);
  ids.forEach((id, p) => h.set(t('model.embed_tokens.weight').data.subarray(id * H, (id + 1) * H), p * H));
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const pre = `model.layers.${l}.`;
    const x = oracleRmsNorm(h, L, t(`${pre}input_layernorm.weight`).data, eps);
    let q = oracleLinear(x, L, t(`${pre}self_attn.q_proj.weight`));
    let k = oracleLinear(x, L, t(`${pre}self_attn.k_proj.weight`));
    const v = oracleLinear(x, L, t(`${pre}self_attn.v_proj.weight`));
    if (!mixtral) {
      q = oracleRmsNorm(q, L * nq, t(`${pre}self_attn.q_norm.weight`).data, eps);
      k = oracleRmsNorm(k, L * nk, t(`${pre}self_attn.k_norm.weight`).data, eps);
    }
    rope(q, L, nq, D, cfg.rope_theta);
    rope(k, L, nk, D, cfg.rope_theta);
    const attn = new Float64Array(L * nq * D);
    for (let i = 0; i < L; i++) for (let hq = 0; hq < nq; hq++) {
      const hk = Math.floor(hq / (nq / nk));
      const s = new Float64Array(i + 1);
      for (let j = 0; j <= i; j++) {
        let dot = 0;
        for (let d = 0; d < D; d++) dot += q[(i * nq + hq) * D + d]! * k[(j * nk + hk) * D + d]!;
        s[j] = dot / Math.sqrt(D);
      }
      const m = Math.max(...s);
      const e = s.map((z) => Math.exp(z - m));
      const z = e.reduce((a, b) => a + b, 0);
      for (let j = 0; j <= i; j++) for (let d = 0; d < D; d++) attn[(i * nq + hq) * D + d]! += (e[j]! / z) * v[(j * nk + hk) * D + d]!;
    }
    const o = oracleLinear(attn, L, t(`${pre}self_attn.o_proj.weight`));
    h = h.map((a, i) => a + o[i]!);
    const y = oracleRmsNorm(h, L, t(`${pre}post_attention_layernorm.weight`).data, eps);
    const block = mixtral ? `${pre}block_sparse_moe.` : `${pre}mlp.`;
    const [gw, uw, dw] = mixtral ? ['w1', 'w3', 'w2'] : ['gate_proj', 'up_proj', 'down_proj'];
    const logits = oracleLinear(y, L, t(`${block}gate.weight`));
    for (let p = 0; p < L; p++) {
      const row = logits.subarray(p * E, (p + 1) * E);
      const mx = Math.max(...row);
      const probs = Array.from(row, (r) => Math.exp(r - mx));
      const sum = probs.reduce((a, b) => a + b, 0);
      const order = probs.map((pr, e) => [pr / sum, e] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]).slice(0, K);
      const total = order.reduce((a, [pr]) => a + pr, 0);
      const xp = y.subarray(p * H, (p + 1) * H);
      for (const [pr, e] of order) {
        const g = oracleLinear(xp, 1, t(`${block}experts.${e}.${gw}.weight`));
        const u = oracleLinear(xp, 1, t(`${block}experts.${e}.${uw}.weight`));
        const act = g.map((a, i) => (a / (1 + Math.exp(-a))) * u[i]!);
        const d = oracleLinear(act, 1, t(`${block}experts.${e}.${dw}.weight`));
        const wgt = renorm ? pr / total : pr;
        for (let j = 0; j < H; j++) h[p * H + j]! += wgt * d[j]!;
      }
    }
  }
  const last = oracleRmsNorm(h.subarray((L - 1) * H), 1, t('model.norm.weight').data, eps);
  return Array.from(oracleLinear(last, 1, t('lm_head.weight')));
}

const argmax = (a: ArrayLike<number>) => {
  let b = 0;
  for (let i = 1; i < a.length; i++) if (a[i]! > a[b]!) b = i;
  return b;
};

const PROMPTS = [[1, 17, 200, 33, 5, 99, 42], [7, 250], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]];
const STEPS = 6;

describe.each([
  ['tiny-mixtral', 'mixtral', ['model.layers.0.block_sparse_moe.experts.7.w1.weight', 'model.layers.0.block_sparse_moe.experts.7.w2.weight', 'model.layers.0.block_sparse_moe.experts.7.w3.weight', 'model.layers.0.block_sparse_moe.gate.weight']],
  ['tiny-qwen3-moe', 'qwen3_moe', ['model.layers.0.mlp.experts.15.down_proj.weight', 'model.layers.0.mlp.experts.15.gate_proj.weight', 'model.layers.0.mlp.experts.15.up_proj.weight', 'model.layers.0.mlp.gate.weight', 'model.layers.0.self_attn.k_norm.weight', 'model.layers.0.self_attn.q_norm.weight']],
] as const)('%s end to end on the CPU backend', (name, arch, expectNames) => {
  const cfgFile = join(FIXTURES, name, 'config.json');
  const rawCfg = JSON.parse(readFileSync(cfgFile, 'utf8')) as Record<string, any>;
  const dir = join(tmp, name);

  it('resolves through the model registry', () => {
    const r = loadModelConfig(cfgFile);
    expect(r.architecture.name).toBe(arch);
    expect(r.architecture.runner).toBe('decoder-llm');
    expect(r.geometry).toMatchObject({ vocabSize: 256, hiddenSize: 64, numHiddenLayers: 2, numKeyValueHeads: 2, headDim: 16 });
  });

  it('init-weights writes the checkpoint in HF names (one tensor per expert and projection)', () => {
    const written = writeRandomModelCheckpoint(dir, rawCfg, { registry: baselineRegistry(), seed: 7, dtype: 'f32', configPath: cfgFile });
    expect(written.architecture).toBe(arch);
    const names = [...readAll(join(dir, 'model.safetensors')).keys()];
    for (const n of expectNames) expect(names).toContain(n);
    expect(names.some((n) => n.includes('w13_weight') || n.includes('qkv_proj'))).toBe(false);
  });

  it(`greedy generate matches the float64 HF-style forward for ${STEPS} steps (tokens identical, logits close)`, () => {
    const loaded = loadModel(dir, { backend: cpuBackend(), registry: baselineRegistry() });
    expect(loaded.weights).toBe('checkpoint');
    const res = generate(loaded.model, loaded.ctx, loaded.geometry, PROMPTS.map((p) => ({ promptIds: p })), { maxTokens: STEPS, collectLogits: true, temperature: 0 });
    const w = readAll(join(dir, 'model.safetensors'));
    let worst = 0;
    res.outputs.forEach((out, s) => {
      const ids = [...PROMPTS[s]!];
      for (let step = 0; step < STEPS; step++) {
        const ref = oracleLogits(rawCfg, w, ids);
        const got = out.logits![step]!;
        const scale = Math.max(...ref.map(Math.abs));
        for (let i = 0; i < ref.length; i++) worst = Math.max(worst, Math.abs(got[i]! - ref[i]!) / scale);
        expect(out.tokenIds[step], `seq ${s} step ${step}`).toBe(argmax(ref));
        ids.push(out.tokenIds[step]!);
      }
    });
    expect(worst).toBeLessThan(1e-4);
    expect(new Set(res.outputs.flatMap((o) => o.tokenIds)).size).toBeGreaterThan(3);
    loaded.model.dispose();
  });

  it('config.json alone gives the same seeded random model as the written checkpoint', () => {
    const a = loadModel(dir, { backend: cpuBackend(), registry: baselineRegistry() });
    const b = loadModel(join(FIXTURES, name), { backend: cpuBackend(), registry: baselineRegistry(), initSeed: 7, dtype: 'f32' });
    expect(b.weights).toBe('random');
    const req = [{ promptIds: PROMPTS[0]! }];
    const ta = generate(a.model, a.ctx, a.geometry, req, { maxTokens: 4, temperature: 0 }).outputs[0]!.tokenIds;
    const tb = generate(b.model, b.ctx, b.geometry, req, { maxTokens: 4, temperature: 0 }).outputs[0]!.tokenIds;
    expect(tb).toEqual(ta);
    a.model.dispose();
    b.model.dispose();
  });
});

describe('a Mixtral checkpoint missing an expert', () => {
  it('is one UserError naming the tensor, the stacked parameter it fills and the config fields to check', () => {
    const cfgFile = join(FIXTURES, 'tiny-mixtral', 'config.json');
    const rawCfg = JSON.parse(readFileSync(cfgFile, 'utf8')) as Record<string, any>;
    const full = join(tmp, 'mixtral-full');
    writeRandomModelCheckpoint(full, rawCfg, { registry: baselineRegistry(), seed: 3, dtype: 'f32', configPath: cfgFile });
    const bad = join(tmp, 'mixtral-bad');
    mkdirSync(bad, { recursive: true });
    writeFileSync(join(bad, 'config.json'), JSON.stringify(rawCfg));
    const f = SafetensorsFile.open(join(full, 'model.safetensors'));
    const gone = 'model.layers.1.block_sparse_moe.experts.3.w2.weight';
    writeSafetensors(join(bad, 'model.safetensors'), [...f.tensors.values()].filter((t) => t.name !== gone).map((t) => ({ name: t.name, dtype: t.dtype!, shape: t.shape, bytes: () => f.readBytes(t.name) })));
    f.close();
    const e = userError(() => loadModel(bad, { backend: cpuBackend(), registry: baselineRegistry() }));
    expect(e.message).toContain(`missing tensor '${gone}' ([64, 96], for model.layers.1.block_sparse_moe.experts.w2_weight)`);
    expect(e.details.field).toBe(gone);
    expect(e.details.fix).toMatch(/num_local_experts/);
  });
});
