/**
 * End to end on the CPU backend: tiny llama / qwen2 / mistral checkpoints written in HF naming, loaded,
 * and generated greedily through the paged engine; checked against an independent float64 forward written
 * here from the HF tensors (dense, no paging, the whole prefix recomputed every step).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { elementAccessor, parseDType } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { parseLlamaConfig } from '../families/dense-moe-llm/config.js';
import { baselineRegistry } from '../index.js';
import { SafetensorsFile } from '../weights/safetensors.js';
import { generate } from './generate.js';
import { loadModel, writeRandomModelCheckpoint } from '../models/load-model.js';
import { oracleRmsNorm } from '../../test/float64-oracle.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');
const tmp = mkdtempSync(join(tmpdir(), 'fk-llama-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

// ---------------------------------------------------------------------------------------------
// The independent oracle: HF's LlamaForCausalLM / Qwen2 / Mistral forward in float64, straight from the
// HF checkpoint names and config.json fields.

type W = Map<string, Float64Array>;

function readAll(file: string): W {
  const f = SafetensorsFile.open(file);
  const out: W = new Map();
  for (const [name, info] of f.tensors) {
    const bytes = f.readBytes(name);
    const acc = elementAccessor(parseDType(info.stDType), bytes);
    const a = new Float64Array(info.shape.reduce((x, y) => x * y, 1));
    for (let i = 0; i < a.length; i++) a[i] = acc.get(i);
    out.set(name, a);
  }
  f.close();
  return out;
}

/** y = x W^T + b, x [n, k] row-major, W [m, k]. */
function lin(x: Float64Array, n: number, w: Float64Array, m: number, b?: Float64Array): Float64Array {
  const k = x.length / n;
  const y = new Float64Array(n * m);
  for (let i = 0; i < n; i++) for (let j = 0; j < m; j++) {
    let s = b ? b[j]! : 0;
    for (let p = 0; p < k; p++) s += x[i * k + p]! * w[j * k + p]!;
    y[i * m + j] = s;
  }
  return y;
}

/** HF's inverse frequencies (default or llama3 rope_type). */
function invFreq(cfg: Record<string, any>, dim: number): number[] {
  const base = cfg.rope_theta ?? 10000;
  const inv = Array.from({ length: dim / 2 }, (_, i) => 1 / base ** ((2 * i) / dim));
  const rs = cfg.rope_scaling;
  if (!rs) return inv;
  const { factor, low_freq_factor: lf, high_freq_factor: hf, original_max_position_embeddings: om } = rs;
  return inv.map((f) => {
    const wl = (2 * Math.PI) / f;
    if (wl < om / hf) return f;
    if (wl > om / lf) return f / factor;
    const sm = (om / wl - lf) / (hf - lf);
    return (1 - sm) * (f / factor) + sm * f;
  });
}

/** Logits of the last position of `ids`, recomputing everything. */
function oracleLogits(cfg: Record<string, any>, w: W, ids: number[]): Float64Array {
  const H: number = cfg.hidden_size;
  const nh: number = cfg.num_attention_heads;
  const nkv: number = cfg.num_key_value_heads;
  const hd: number = cfg.head_dim ?? H / nh;
  const I: number = cfg.intermediate_size;
  const V: number = cfg.vocab_size;
  const eps: number = cfg.rms_norm_eps;
  const win: number = cfg.model_type === 'mistral' ? (cfg.sliding_window ?? 0) : 0;
  const n = ids.length;
  const inv = invFreq(cfg, hd);
  let x = new Float64Array(n * H);
  ids.forEach((id, t) => x.set(w.get('model.embed_tokens.weight')!.subarray(id * H, (id + 1) * H), t * H));
  const rope = (a: Float64Array, heads: number) => {
    for (let t = 0; t < n; t++) for (let h = 0; h < heads; h++) for (let i = 0; i < hd / 2; i++) {
      const o = (t * heads + h) * hd;
      const c = Math.cos(t * inv[i]!), s = Math.sin(t * inv[i]!);
      const a1 = a[o + i]!, a2 = a[o + i + hd / 2]!;
      a[o + i] = a1 * c - a2 * s;
      a[o + i + hd / 2] = a2 * c + a1 * s;
    }
  };
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    const g = (k: string) => w.get(p + k);
    const hN = oracleRmsNorm(x, n, g('input_layernorm.weight')!, eps);
    const q = lin(hN, n, g('self_attn.q_proj.weight')!, nh * hd, g('self_attn.q_proj.bias'));
    const k = lin(hN, n, g('self_attn.k_proj.weight')!, nkv * hd, g('self_attn.k_proj.bias'));
    const v = lin(hN, n, g('self_attn.v_proj.weight')!, nkv * hd, g('self_attn.v_proj.bias'));
    rope(q, nh);
    rope(k, nkv);
    const att = new Float64Array(n * nh * hd);
    for (let h = 0; h < nh; h++) {
      const kh = Math.floor(h / (nh / nkv));
      for (let i = 0; i < n; i++) {
        const js: number[] = [];
        for (let j = 0; j <= i; j++) if (!win || i - j < win) js.push(j);
        const sc = js.map((j) => {
          let s = 0;
          for (let d = 0; d < hd; d++) s += q[(i * nh + h) * hd + d]! * k[(j * nkv + kh) * hd + d]!;
          return s / Math.sqrt(hd);
        });
        const m = Math.max(...sc);
        const e = sc.map((s) => Math.exp(s - m));
        const z = e.reduce((a, b) => a + b, 0);
        js.forEach((j, jj) => {
          for (let d = 0; d < hd; d++) att[(i * nh + h) * hd + d]! += (e[jj]! / z) * v[(j * nkv + kh) * hd + d]!;
        });
      }
    }
    const o = lin(att, n, g('self_attn.o_proj.weight')!, H, g('self_attn.o_proj.bias'));
    x = x.map((val, i) => val + o[i]!);
    const h2 = oracleRmsNorm(x, n, g('post_attention_layernorm.weight')!, eps);
    const gate = lin(h2, n, g('mlp.gate_proj.weight')!, I);
    const up = lin(h2, n, g('mlp.up_proj.weight')!, I);
    const act = gate.map((a, i) => (a / (1 + Math.exp(-a))) * up[i]!);
    const down = lin(act, n, g('mlp.down_proj.weight')!, H);
    x = x.map((val, i) => val + down[i]!);
  }
  const last = oracleRmsNorm(x.subarray((n - 1) * H), 1, w.get('model.norm.weight')!, eps);
  const head = cfg.tie_word_embeddings ? w.get('model.embed_tokens.weight')! : w.get('lm_head.weight')!;
  return lin(last, 1, head, V);
}

const argmax = (a: ArrayLike<number>) => {
  let b = 0;
  for (let i = 1; i < a.length; i++) if (a[i]! > a[b]!) b = i;
  return b;
};

// ---------------------------------------------------------------------------------------------

const PROMPTS = [[1, 17, 200, 33, 5, 99, 42], [7, 250], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]];
const STEPS = 10;

describe.each(['tiny-llama', 'tiny-qwen2', 'tiny-mistral'])('%s end to end on the CPU backend', (name) => {
  const rawCfg = JSON.parse(readFileSync(join(FIXTURES, name, 'config.json'), 'utf8')) as Record<string, any>;
  const dir = join(tmp, name);

  it(`greedy output matches an independent float64 forward for ${STEPS} steps (tokens identical, logits close)`, () => {
    writeRandomModelCheckpoint(dir, rawCfg, { registry: baselineRegistry(), seed: 5, dtype: 'f32', configPath: join(FIXTURES, name, 'config.json') });
    const loaded = loadModel(dir, { backend: cpuBackend(), registry: baselineRegistry() });
    expect(loaded.weights).toBe('checkpoint');
    expect(loaded.ctx.dtype).toBe('f32');
    const res = generate(loaded.model, loaded.ctx, loaded.geometry, PROMPTS.map((p) => ({ promptIds: p })), { maxTokens: STEPS, collectLogits: true });
    const w = readAll(join(dir, 'model.safetensors'));
    let worst = 0;
    res.outputs.forEach((out, s) => {
      expect(out.tokenIds.length).toBe(STEPS);
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
    // Not a degenerate model: the sequences do not all repeat one token.
    expect(new Set(res.outputs.flatMap((o) => o.tokenIds)).size).toBeGreaterThan(3);
    loaded.model.dispose();
  });

  it('config.json alone gives the same seeded random model as the written checkpoint', () => {
    const cfg = parseLlamaConfig(rawCfg);
    const a = loadModel(dir, { backend: cpuBackend(), registry: baselineRegistry() });
    const b = loadModel(join(FIXTURES, name), { backend: cpuBackend(), registry: baselineRegistry(), initSeed: 5, dtype: 'f32' });
    expect(b.weights).toBe('random');
    const req = [{ promptIds: PROMPTS[0]! }];
    const ta = generate(a.model, a.ctx, cfg, req, { maxTokens: 4 }).outputs[0]!.tokenIds;
    const tb = generate(b.model, b.ctx, cfg, req, { maxTokens: 4 }).outputs[0]!.tokenIds;
    expect(tb).toEqual(ta);
  });
});

describe('generate', () => {
  const dir = join(tmp, 'tiny-llama-bf16');
  const rawCfg = JSON.parse(readFileSync(join(FIXTURES, 'tiny-llama', 'config.json'), 'utf8')) as Record<string, unknown>;
  const cfg = parseLlamaConfig(rawCfg);

  it('loads a bf16 checkpoint into a bf16 model (direct byte stream) and into an f32 model (converted)', () => {
    writeRandomModelCheckpoint(dir, rawCfg, { registry: baselineRegistry(), seed: 3, dtype: 'bf16' });
    expect(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')).torch_dtype).toBe('bfloat16');
    const bf = loadModel(dir, { backend: cpuBackend(), registry: baselineRegistry() });
    const f32 = loadModel(dir, { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32' });
    expect(bf.ctx.dtype).toBe('bf16');
    const emb = (m: typeof bf) => m.model.namedParameters().find(([k]) => k === 'model.layers.1.self_attn.qkv_proj.weight')![1].toFloat64Array();
    expect([...emb(f32)]).toEqual([...emb(bf)]);
    const req = [{ promptIds: PROMPTS[0]! }, { promptIds: PROMPTS[1]! }];
    const out = generate(bf.model, bf.ctx, cfg, req, { maxTokens: 6 });
    expect(out.outputs.map((o) => o.tokenIds.length)).toEqual([6, 6]);
    expect(out.steps).toBe(6);
  });

  it('samples with temperature / top-k / top-p reproducibly from a seed, and per-request max tokens', () => {
    const m = loadModel(join(FIXTURES, 'tiny-llama'), { backend: cpuBackend(), registry: baselineRegistry() });
    const req = [{ promptIds: PROMPTS[0]!, maxTokens: 3 }, { promptIds: PROMPTS[1]! }];
    const opts = { maxTokens: 7, temperature: 0.9, topK: 50, topP: 0.9, seed: 1234 };
    const a = generate(m.model, m.ctx, cfg, req, opts);
    const b = generate(m.model, m.ctx, cfg, req, opts);
    expect(a.outputs.map((o) => o.tokenIds)).toEqual(b.outputs.map((o) => o.tokenIds));
    expect(a.outputs.map((o) => o.tokenIds.length)).toEqual([3, 7]);
    const c = generate(m.model, m.ctx, cfg, req, { ...opts, seed: 99 });
    expect(c.outputs.map((o) => o.tokenIds)).not.toEqual(a.outputs.map((o) => o.tokenIds));
  });

  it('rejects prompt ids outside the vocabulary and prompts past max_position_embeddings', () => {
    const m = loadModel(join(FIXTURES, 'tiny-llama'), { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32' });
    expect(() => generate(m.model, m.ctx, cfg, [{ promptIds: [1, 2] }, { promptIds: [3, 256] }])).toThrow(/prompt 1, token 1: id 256 is outside the vocabulary \[0, 256\)/);
    expect(() => generate(m.model, m.ctx, cfg, [{ promptIds: [-1] }])).toThrow(/id -1 is outside/);
    expect(() => generate(m.model, m.ctx, cfg, [{ promptIds: [1] }], { maxTokens: 300 })).toThrow(/exceed max_position_embeddings 256/);
  });
});
