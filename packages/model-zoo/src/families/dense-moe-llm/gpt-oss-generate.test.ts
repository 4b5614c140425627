/**
 * gpt-oss end to end on the CPU backend: the model registry resolves the tiny fixture (GptOssForCausalLM), init-weights
 * writes a seeded checkpoint in HF's names (separate q/k/v_proj with biases, self_attn.sinks, mlp.router, the experts'
 * gate_up_proj / down_proj with biases), loadModel stacks q/k/v back, and greedy generate through the engine (paged
 * cache, sliding and full layers) is checked step by step against an independent float64 forward written here from
 * HF's modeling_gpt_oss math over the checkpoint's own tensors: a full recompute per step, eager attention with the
 * sink logit concatenated to each row, the sliding mask q - k < window, YaRN cos / sin from HF's formulas, top-k then
 * softmax routing, interleaved gate / up, the clamped SwiGLU. Then the MXFP4 form: the released checkpoints' *_blocks /
 * *_scales (random bytes here) generate the same tokens as a dense checkpoint of their decoded weights.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CaptureIndexSchema, Rng, casesFromCaptures, compareTensors, elementAccessor, parseDType, toHostArray, toleranceFor, withContext, type DType, type Module, type Tensor } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { captureWorkload } from '../../engine/capture.js';
import { generate } from '../../engine/generate.js';
import { syntheticWorkload } from '../../engine/workloads.js';
import { baselineRegistry } from '../../index.js';
import { loadModel, loadModelConfig, writeRandomModelCheckpoint } from '../../models/load-model.js';
import { SafetensorsFile, writeSafetensors } from '../../weights/safetensors.js';
import { initWeightsOnDevice } from '../../weights/random-init.js';
import { gptOssWeightRules, mxfp4ScaleFor } from './gpt-oss/weights.js';
import { parseGptOssConfig } from './gpt-oss/config.js';
import { oracleLinear, oracleRmsNorm } from '../../../test/float64-oracle.js';

const FIXTURE = join(import.meta.dirname, '../../../fixtures/tiny-gpt-oss');
const cfgFile = join(FIXTURE, 'config.json');
const rawCfg = JSON.parse(readFileSync(cfgFile, 'utf8')) as Record<string, any>;
const tmp = mkdtempSync(join(tmpdir(), 'fk-gpt-oss-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

type T = { shape: number[]; data: Float64Array; dtype: DType };
type W = Map<string, T>;

function readAll(file: string): W {
  const f = SafetensorsFile.open(file);
  const out: W = new Map();
  for (const [name, info] of f.tensors) {
    const dtype = parseDType(info.stDType);
    const acc = elementAccessor(dtype, f.readBytes(name));
    const a = new Float64Array(info.shape.reduce((x, y) => x * y, 1));
    for (let i = 0; i < a.length; i++) a[i] = acc.get(i);
    out.set(name, { shape: [...info.shape], data: a, dtype });
  }
  f.close();
  return out;
}

function writeAll(dir: string, w: W, cfg: Record<string, unknown>): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg));
  writeSafetensors(join(dir, 'model.safetensors'), [...w].map(([name, t]) => ({
    name, dtype: t.dtype, shape: t.shape,
    bytes: () => (t.dtype === 'u8' ? Uint8Array.from(t.data) : new Uint8Array(Float32Array.from(t.data).buffer)),
  })));
}

/** HF _compute_yarn_parameters (truncate false) -> inv_freq and the attention factor. */
function yarn(cfg: Record<string, any>, D: number): { inv: number[]; mscale: number } {
  const rs = cfg.rope_scaling;
  const base: number = cfg.rope_theta;
  const dimOf = (rot: number) => (D * Math.log(rs.original_max_position_embeddings / (rot * 2 * Math.PI))) / (2 * Math.log(base));
  const low = Math.max(dimOf(rs.beta_fast), 0);
  const high = Math.min(dimOf(rs.beta_slow), D - 1);
  const inv = Array.from({ length: D / 2 }, (_, i) => {
    const ramp = Math.min(1, Math.max(0, (i - low) / (high - low)));
    const pos = Math.pow(base, (2 * i) / D);
    return (1 / (rs.factor * pos)) * ramp + (1 / pos) * (1 - ramp);
  });
  return { inv, mscale: 0.1 * Math.log(rs.factor) + 1 };
}

/** HF's _apply_rotary_emb on [L, heads, D] at positions 0..L-1: halves (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin). */
function rope(x: Float64Array, L: number, heads: number, D: number, r: { inv: number[]; mscale: number }): void {
  const half = D / 2;
  for (let p = 0; p < L; p++) for (let h = 0; h < heads; h++) for (let i = 0; i < half; i++) {
    const c = Math.cos(p * r.inv[i]!) * r.mscale;
    const s = Math.sin(p * r.inv[i]!) * r.mscale;
    const o = (p * heads + h) * D;
    const [x1, x2] = [x[o + i]!, x[o + half + i]!];
    x[o + i] = x1 * c - x2 * s;
    x[o + half + i] = x2 * c + x1 * s;
  }
}

/** The MXFP4 decode of HF's convert_moe_packed_tensors: [E, rows, G, 16] bytes + [E, rows, G] scales -> [E, rows, 32 G]. */
function dequant(blocks: T, scales: T): Float64Array {
  const lut = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];
  const out = new Float64Array(blocks.data.length * 2);
  for (let b = 0; b < scales.data.length; b++) {
    const s = Math.pow(2, scales.data[b]! - 127);
    for (let j = 0; j < 16; j++) {
      const byte = blocks.data[b * 16 + j]!;
      out[b * 32 + 2 * j] = lut[byte & 0x0f]! * s;
      out[b * 32 + 2 * j + 1] = lut[byte >> 4]! * s;
    }
  }
  return out;
}

/** [E, a, b] -> [E, b, a] (HF transposes the decoded [E, out, in] to its x @ W layout). */
function swapLast(x: Float64Array, E: number, a: number, b: number): Float64Array {
  const y = new Float64Array(x.length);
  for (let e = 0; e < E; e++) for (let i = 0; i < a; i++) for (let j = 0; j < b; j++) y[(e * b + j) * a + i] = x[(e * a + i) * b + j]!;
  return y;
}

/** Logits of the last token of `ids` by HF's modeling_gpt_oss math, in float64 (dense or MXFP4 experts). */
function oracleLogits(cfg: Record<string, any>, w: W, ids: number[]): number[] {
  const H: number = cfg.hidden_size;
  const I: number = cfg.intermediate_size;
  const nq: number = cfg.num_attention_heads;
  const nk: number = cfg.num_key_value_heads;
  const D: number = cfg.head_dim;
  const E: number = cfg.num_local_experts;
  const K: number = cfg.num_experts_per_tok;
  const eps: number = cfg.rms_norm_eps;
  const limit: number = cfg.swiglu_limit;
  const L = ids.length;
  const t = (n: string) => {
    const v = w.get(n);
    if (!v) throw new Error(`oracle: no tensor ${n}`);
    return v;
  };
  const ry = yarn(cfg, D);
  let h = new Float64Array(L * H);
  ids.forEach((id, p) => h.set(t('model.embed_tokens.weight').data.subarray(id * H, (id + 1) * H), p * H));
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const pre = `model.layers.${l}.`;
    const a = `${pre}self_attn.`;
    const x = oracleRmsNorm(h, L, t(`${pre}input_layernorm.weight`).data, eps);
    const q = oracleLinear(x, L, t(`${a}q_proj.weight`), t(`${a}q_proj.bias`));
    const k = oracleLinear(x, L, t(`${a}k_proj.weight`), t(`${a}k_proj.bias`));
    const v = oracleLinear(x, L, t(`${a}v_proj.weight`), t(`${a}v_proj.bias`));
    rope(q, L, nq, D, ry);
    rope(k, L, nk, D, ry);
    const sliding = cfg.layer_types[l] === 'sliding_attention';
    const attn = new Float64Array(L * nq * D);
    for (let i = 0; i < L; i++) for (let hq = 0; hq < nq; hq++) {
      const hk = Math.floor(hq / (nq / nk));
      const row: number[] = [];
      for (let j = 0; j <= i; j++) {
        let dot = 0;
        for (let d = 0; d < D; d++) dot += q[(i * nq + hq) * D + d]! * k[(j * nk + hk) * D + d]!;
        row.push(sliding && i - j >= cfg.sliding_window ? -Infinity : dot / Math.sqrt(D));
      }
      row.push(t(`${a}sinks`).data[hq]!); // the sink column, dropped after the softmax
      const m = Math.max(...row);
      const e = row.map((z) => Math.exp(z - m));
      const z = e.reduce((s, y) => s + y, 0);
      for (let j = 0; j <= i; j++) for (let d = 0; d < D; d++) attn[(i * nq + hq) * D + d]! += (e[j]! / z) * v[(j * nk + hk) * D + d]!;
    }
    const o = oracleLinear(attn, L, t(`${a}o_proj.weight`), t(`${a}o_proj.bias`));
    h = h.map((y, i) => y + o[i]!);
    const y = oracleRmsNorm(h, L, t(`${pre}post_attention_layernorm.weight`).data, eps);
    const m = `${pre}mlp.`;
    const logits = oracleLinear(y, L, t(`${m}router.weight`), t(`${m}router.bias`));
    const blocks = w.get(`${m}experts.gate_up_proj_blocks`);
    const gateUp = blocks ? swapLast(dequant(blocks, t(`${m}experts.gate_up_proj_scales`)), E, 2 * I, H) : t(`${m}experts.gate_up_proj`).data; // [E, H, 2I]
    const down = blocks ? swapLast(dequant(t(`${m}experts.down_proj_blocks`), t(`${m}experts.down_proj_scales`)), E, H, I) : t(`${m}experts.down_proj`).data; // [E, I, H]
    const guB = t(`${m}experts.gate_up_proj_bias`).data;
    const dB = t(`${m}experts.down_proj_bias`).data;
    for (let p = 0; p < L; p++) {
      const top = Array.from(logits.subarray(p * E, (p + 1) * E), (z, e) => [z, e] as const).sort((u, v2) => v2[0] - u[0] || u[1] - v2[1]).slice(0, K);
      const mx = top[0]![0];
      const ex = top.map(([z]) => Math.exp(z - mx));
      const zs = ex.reduce((s, u) => s + u, 0);
      top.forEach(([, e], j) => {
        const gu = new Float64Array(2 * I);
        for (let c = 0; c < 2 * I; c++) {
          let acc = guB[e * 2 * I + c]!;
          for (let r = 0; r < H; r++) acc += y[p * H + r]! * gateUp[(e * H + r) * 2 * I + c]!;
          gu[c] = acc;
        }
        const act = new Float64Array(I);
        for (let i = 0; i < I; i++) {
          const g = Math.min(gu[2 * i]!, limit);
          const u = Math.max(-limit, Math.min(gu[2 * i + 1]!, limit));
          act[i] = (u + 1) * g / (1 + Math.exp(-(cfg.swiglu_alpha ?? 1.702) * g));
        }
        for (let c = 0; c < H; c++) {
          let acc = dB[e * H + c]!;
          for (let i = 0; i < I; i++) acc += act[i]! * down[(e * I + i) * H + c]!;
          h[p * H + c]! += (ex[j]! / zs) * acc;
        }
      });
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

// one prompt longer than the sliding window of 8, so layer 0 masks and layer 1 does not
const PROMPTS = [[1, 17, 200, 33, 5, 99, 42, 7, 8, 250, 3, 64], [7, 250], [9, 9, 120, 44, 2]];
const STEPS = 6;

/** Greedy generate of `dir`'s model, checked step by step against the oracle on `w`; returns the tokens. */
function generateAgainstOracle(dir: string, cfg: Record<string, any>, w: W): number[][] {
  const loaded = loadModel(dir, { backend: cpuBackend(), registry: baselineRegistry() });
  expect(loaded.weights).toBe('checkpoint');
  const res = generate(loaded.model, loaded.ctx, loaded.geometry, PROMPTS.map((p) => ({ promptIds: p })), { maxTokens: STEPS, collectLogits: true, temperature: 0 });
  let worst = 0;
  res.outputs.forEach((out, s) => {
    const ids = [...PROMPTS[s]!];
    for (let step = 0; step < STEPS; step++) {
      const ref = oracleLogits(cfg, w, ids);
      const got = out.logits![step]!;
      const scale = Math.max(...ref.map(Math.abs));
      for (let i = 0; i < ref.length; i++) worst = Math.max(worst, Math.abs(got[i]! - ref[i]!) / scale);
      expect(out.tokenIds[step], `seq ${s} step ${step}`).toBe(argmax(ref));
      ids.push(out.tokenIds[step]!);
    }
  });
  expect(worst).toBeLessThan(1e-4);
  loaded.model.dispose();
  return res.outputs.map((o) => [...o.tokenIds]);
}

describe('tiny-gpt-oss end to end on the CPU backend', () => {
  const dir = join(tmp, 'dense');

  it('resolves through the model registry', () => {
    const r = loadModelConfig(cfgFile);
    expect(r.architecture.name).toBe('gpt_oss');
    expect(r.architecture.runner).toBe('decoder-llm');
    expect(r.geometry).toMatchObject({ vocabSize: 256, hiddenSize: 64, numHiddenLayers: 2, numAttentionHeads: 4, numKeyValueHeads: 2, headDim: 16, maxPositionEmbeddings: 256 });
  });

  it('init-weights writes the checkpoint in HF names', () => {
    const written = writeRandomModelCheckpoint(dir, rawCfg, { registry: baselineRegistry(), seed: 7, dtype: 'f32', configPath: cfgFile });
    expect(written.architecture).toBe('gpt_oss');
    const w = readAll(join(dir, 'model.safetensors'));
    for (const n of [
      'model.layers.0.self_attn.q_proj.weight', 'model.layers.0.self_attn.q_proj.bias', 'model.layers.0.self_attn.v_proj.bias', 'model.layers.0.self_attn.o_proj.bias',
      'model.layers.0.self_attn.sinks', 'model.layers.1.mlp.router.weight', 'model.layers.1.mlp.router.bias', 'model.layers.1.mlp.experts.gate_up_proj',
      'model.layers.1.mlp.experts.gate_up_proj_bias', 'model.layers.1.mlp.experts.down_proj', 'model.layers.1.mlp.experts.down_proj_bias', 'lm_head.weight',
    ]) expect(w.has(n), n).toBe(true);
    expect(w.get('model.layers.1.mlp.experts.gate_up_proj')!.shape).toEqual([8, 64, 64]);
    expect(w.get('model.layers.1.mlp.experts.down_proj')!.shape).toEqual([8, 32, 64]);
    expect([...w.keys()].some((n) => n.includes('qkv_proj') || n.includes('cos_sin_cache'))).toBe(false);
    // random sinks, so they matter
    const sinks = w.get('model.layers.0.self_attn.sinks')!;
    sinks.data.forEach((_, i) => (sinks.data[i] = [1.5, -0.5, 3, 0.2][i]!));
    writeAll(dir, w, rawCfg);
  });

  it(`greedy generate matches the float64 HF-style forward for ${STEPS} steps (tokens identical, logits close)`, () => {
    const toks = generateAgainstOracle(dir, rawCfg, readAll(join(dir, 'model.safetensors')));
    expect(new Set(toks.flat()).size).toBeGreaterThan(3);
  });

  it('config.json alone gives the same seeded random model as the written checkpoint (before its sinks were set)', () => {
    const seeded = join(tmp, 'seeded');
    writeRandomModelCheckpoint(seeded, rawCfg, { registry: baselineRegistry(), seed: 7, dtype: 'f32', configPath: cfgFile });
    const a = loadModel(seeded, { backend: cpuBackend(), registry: baselineRegistry() });
    const b = loadModel(FIXTURE, { backend: cpuBackend(), registry: baselineRegistry(), initSeed: 7, dtype: 'f32' });
    expect(b.weights).toBe('random');
    const req = [{ promptIds: PROMPTS[0]! }];
    const ta = generate(a.model, a.ctx, a.geometry, req, { maxTokens: 4, temperature: 0 }).outputs[0]!.tokenIds;
    const tb = generate(b.model, b.ctx, b.geometry, req, { maxTokens: 4, temperature: 0 }).outputs[0]!.tokenIds;
    expect(tb).toEqual(ta);
    a.model.dispose();
    b.model.dispose();
  });

  it('the MXFP4 checkpoint (*_blocks / *_scales) generates what the dense checkpoint of its decoded weights does, both matching the oracle', () => {
    const base = readAll(join(dir, 'model.safetensors'));
    const [E, H, I] = [8, 64, 32];
    const rng = new Rng(21);
    const q: W = new Map([...base].filter(([n]) => !/experts\.(gate_up_proj|down_proj)$/.test(n)));
    const deq: W = new Map(base);
    for (let l = 0; l < 2; l++) {
      const p = `model.layers.${l}.mlp.experts.`;
      for (const [name, rows, inner] of [['gate_up_proj', 2 * I, H], ['down_proj', H, I]] as const) {
        const G = inner / 32;
        const blocks: T = { shape: [E, rows, G, 16], dtype: 'u8', data: Float64Array.from({ length: E * rows * G * 16 }, () => rng.int(0, 256)) };
        // scales around 2^-4: decoded weights of std ~ 0.3 (the dense checkpoint's 0.2)
        const scales: T = { shape: [E, rows, G], dtype: 'u8', data: Float64Array.from({ length: E * rows * G }, () => 122 + rng.int(0, 3)) };
        q.set(`${p}${name}_blocks`, blocks);
        q.set(`${p}${name}_scales`, scales);
        deq.set(`${p}${name}`, { shape: [E, inner, rows], dtype: 'f32', data: swapLast(dequant(blocks, scales), E, rows, inner) });
      }
    }
    const mxCfg = { ...rawCfg, quantization_config: { quant_method: 'mxfp4', modules_to_not_convert: ['model.layers.*.self_attn', 'model.layers.*.mlp.router', 'model.embed_tokens', 'lm_head'] } };
    writeAll(join(tmp, 'mxfp4'), q, mxCfg);
    writeAll(join(tmp, 'dequantized'), deq, rawCfg);
    const tq = generateAgainstOracle(join(tmp, 'mxfp4'), mxCfg, q);
    const td = generateAgainstOracle(join(tmp, 'dequantized'), rawCfg, deq);
    expect(tq).toEqual(td);
    expect(new Set(tq.flat()).size).toBeGreaterThan(3);
    // blocks stored as floats are refused (they are read bit-exact)
    const f = new Map(q);
    f.set('model.layers.1.mlp.experts.down_proj_scales', { ...q.get('model.layers.1.mlp.experts.down_proj_scales')!, dtype: 'f32' });
    writeAll(join(tmp, 'mxfp4-f32-scales'), f, mxCfg);
    expect(() => loadModel(join(tmp, 'mxfp4-f32-scales'), { backend: cpuBackend(), registry: baselineRegistry() })).toThrow(/tensor 'model\.layers\.1\.mlp\.experts\.down_proj_scales' in .* has dtype F32, expected U8 \(read bit-exact\)/);
  });

  it('a dense checkpoint under an MXFP4 config is one UserError naming the blocks and the fix', () => {
    const bad = join(tmp, 'bad');
    const w = readAll(join(dir, 'model.safetensors'));
    writeAll(bad, w, { ...rawCfg, quantization_config: { quant_method: 'mxfp4' } });
    expect(() => loadModel(bad, { backend: cpuBackend(), registry: baselineRegistry() })).toThrow(/missing tensor 'model\.layers\.0\.mlp\.experts\.gate_up_proj_blocks'/);
  });
});

describe('capture of tiny-gpt-oss', () => {
  it('records the sinks and the step of every layer; the captured cases build inputs and match the float64 references', () => {
    const baseline = baselineRegistry();
    const workload = syntheticWorkload({ numRequests: 3, inputLen: [6, 20], outputLen: [3, 5], seed: 2, vocabSize: 256 });
    const out = join(tmp, 'capture');
    const { path } = captureWorkload({
      baseline, workload, outDir: out, model: 'tiny-gpt-oss', engine: { maxModelLen: 64, maxNumSeqs: 4, maxNumBatchedTokens: 16 },
      load: (registry) => {
        const m = loadModel(FIXTURE, { backend: cpuBackend(), registry, dtype: 'f32', initSeed: 3 });
        return { model: m.model, ctx: m.ctx, geometry: m.geometry, dispose: () => m.model.dispose() };
      },
    });
    const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
    expect(Object.keys(index.tasks)).toEqual(expect.arrayContaining(['L1/yarn_rotary_emb', 'L1/varlen_prefill_attention', 'L1/paged_decode_attention', 'L2/attention', 'L2/gpt_oss_moe', 'L3/gpt_oss_decoder', 'L4/gpt_oss']));
    for (const id of ['L1/varlen_prefill_attention', 'L1/paged_decode_attention']) expect(index.tasks[id]!.forward.every((f) => f.options?.sinks === true), id).toBe(true);
    for (const id of ['L3/gpt_oss_decoder', 'L4/gpt_oss']) expect(index.tasks[id]!.forward.every((f) => Array.isArray(f.options?.prefillLens)), id).toBe(true);
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry: baseline };
    for (const id of ['L1/varlen_prefill_attention', 'L1/paged_decode_attention', 'L2/attention', 'L2/gpt_oss_moe', 'L3/gpt_oss_decoder', 'L4/gpt_oss']) {
      const task = baseline.task(id)!;
      for (const c of casesFromCaptures(task, [{ index, resolve: (f) => join(out, f), path }], 2)) {
        if (id.includes('gpt_oss')) {
          const w = task.work(c);
          expect(Number.isFinite(w.flops) && Number.isFinite(w.bytes) && w.flops > 0, `${id} ${c.name} work`).toBe(true);
        }
        const rng = new Rng(5);
        const m = baseline.createIn<Module & { forward(...a: (Tensor | null)[]): Tensor | Tensor[] }>(ctx, id, ...c.init);
        task.initParameters?.(m, c, rng);
        withContext(ctx, () => {
          const inputs = task.makeInputs(c, ctx, rng);
          expect(inputs.length, `${id} ${c.name}`).toBe(task.inputs.length);
          const res = m.forward(...inputs);
          const got = Array.isArray(res) ? res : [res];
          const params = new Map(m.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
          const ref = task.reference(inputs.map((t) => (t ? toHostArray(t) : null)), params, c);
          got.forEach((g, i) => expect(compareTensors(g, ref[i]!, toleranceFor(task, 'f32')).status, `${id} ${c.name} output ${i}`).toBe('PASSED'));
          for (const t of [...inputs, ...got]) t?.dispose();
        });
        m.dispose();
      }
    }
  });
});

describe('random MXFP4 gpt-oss', () => {
  const mxCfg = { ...rawCfg, quantization_config: { quant_method: 'mxfp4' } };
  const cfgDir = join(tmp, 'mx-config');
  const ckDir = join(tmp, 'mx-random');

  it('init-weights writes the experts as U8 blocks (random bytes) and scales (the dense std), the rest as floats', () => {
    mkdirSync(cfgDir, { recursive: true });
    writeFileSync(join(cfgDir, 'config.json'), JSON.stringify(mxCfg));
    writeRandomModelCheckpoint(ckDir, mxCfg, { registry: baselineRegistry(), seed: 5, dtype: 'bf16', configPath: join(cfgDir, 'config.json') });
    const f = SafetensorsFile.open(join(ckDir, 'model.safetensors'));
    const info = (n: string) => f.tensors.get(n)!;
    expect(info('model.layers.0.mlp.experts.gate_up_proj_blocks')).toMatchObject({ stDType: 'U8', shape: [8, 64, 2, 16] });
    expect(info('model.layers.0.mlp.experts.down_proj_scales')).toMatchObject({ stDType: 'U8', shape: [8, 64, 1] });
    expect(info('model.layers.0.mlp.experts.down_proj_bias').stDType).toBe('BF16');
    const blocks = f.readBytes('model.layers.1.mlp.experts.gate_up_proj_blocks');
    expect(new Set(blocks).size).toBeGreaterThan(200); // random bytes
    const scales = f.readBytes('model.layers.1.mlp.experts.gate_up_proj_scales');
    expect(new Set(scales)).toEqual(new Set([mxfp4ScaleFor(0.2)]));
    f.close();
    expect(mxfp4ScaleFor(0.02)).toBe(120); // gpt-oss's initializer_range: 2^-7 * 2.93 = 0.023
  });

  it('config.json alone gives the same model as that checkpoint (host random init), and it generates', () => {
    const a = loadModel(ckDir, { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32' });
    const b = loadModel(cfgDir, { backend: cpuBackend(), registry: baselineRegistry(), initSeed: 5, dtype: 'f32' });
    expect([a.weights, b.weights]).toEqual(['checkpoint', 'random']);
    const req = [{ promptIds: PROMPTS[0]! }];
    const ta = generate(a.model, a.ctx, a.geometry, req, { maxTokens: 5, temperature: 0 }).outputs[0]!.tokenIds;
    const tb = generate(b.model, b.ctx, b.geometry, req, { maxTokens: 5, temperature: 0 }).outputs[0]!.tokenIds;
    expect(tb).toEqual(ta);
    a.model.dispose();
    b.model.dispose();
  });

  it('the device-pool random init fills the integer tensors from their own draws', () => {
    const cfg = parseGptOssConfig(mxCfg);
    const registry = baselineRegistry();
    const m = registry.createIn<import('@fastkernels/core').Module>({ backend: cpuBackend(), device: 0, dtype: 'bf16', registry }, 'L4/gpt_oss', cfg);
    initWeightsOnDevice(m, gptOssWeightRules(cfg), 9);
    const p = new Map(m.namedParameters());
    expect(new Set(p.get('model.layers.0.mlp.experts.down_proj_scales')!.toFloat64Array())).toEqual(new Set([mxfp4ScaleFor(0.2)]));
    expect(new Set(p.get('model.layers.0.mlp.experts.down_proj_blocks')!.toFloat64Array()).size).toBeGreaterThan(200);
    expect(p.get('model.layers.0.self_attn.sinks')!.toFloat64Array().some((v) => v !== 0)).toBe(true);
    m.dispose();
  });
});
