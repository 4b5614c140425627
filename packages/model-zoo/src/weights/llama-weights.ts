/**
 * Llama-family weights: the mapping from HF checkpoint names to our parameters (q/k/v -> merged qkv_proj,
 * gate/up -> merged gate_up_proj, lm_head absent when tied), streaming load into a built model, seeded
 * random init, and writing an HF-named checkpoint (config.json + model.safetensors).
 */
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DTYPE_INFO, Rng, Tensor, UserError, elementAccessor, fmix32, formatShape, numel, shapesEqual, type DType, type Module } from '@fastkernels/core';
import type { LlamaConfig } from '../families/dense-moe-llm/config.js';
import { Checkpoint, writeSafetensors, type WriteEntry } from './safetensors.js';

/** One HF tensor and where it goes: rows [rowOffset, rowOffset + shape[0]) of our parameter `target`. */
export interface WeightMapping {
  readonly hfName: string;
  readonly shape: readonly number[];
  readonly target: string;
  readonly rowOffset: number;
  readonly kind: 'matrix' | 'norm' | 'bias';
}

/** Every HF tensor a Llama/Qwen2/Mistral checkpoint holds for a config, with its destination. */
export function llamaWeightMap(cfg: LlamaConfig): WeightMapping[] {
  const H = cfg.hiddenSize;
  const D = cfg.headDim;
  const q = cfg.numAttentionHeads * D;
  const kv = cfg.numKeyValueHeads * D;
  const I = cfg.intermediateSize;
  const out: WeightMapping[] = [];
  const add = (hfName: string, shape: number[], target: string, rowOffset = 0, kind: WeightMapping['kind'] = shape.length === 2 ? 'matrix' : 'bias') =>
    out.push({ hfName, shape, target, rowOffset, kind });
  add('model.embed_tokens.weight', [cfg.vocabSize, H], 'model.embed_tokens.weight');
  for (let l = 0; l < cfg.numHiddenLayers; l++) {
    const p = `model.layers.${l}`;
    const qkv = `${p}.self_attn.qkv_proj`;
    add(`${p}.self_attn.q_proj.weight`, [q, H], `${qkv}.weight`, 0);
    add(`${p}.self_attn.k_proj.weight`, [kv, H], `${qkv}.weight`, q);
    add(`${p}.self_attn.v_proj.weight`, [kv, H], `${qkv}.weight`, q + kv);
    if (cfg.qkvBias) {
      add(`${p}.self_attn.q_proj.bias`, [q], `${qkv}.bias`, 0);
      add(`${p}.self_attn.k_proj.bias`, [kv], `${qkv}.bias`, q);
      add(`${p}.self_attn.v_proj.bias`, [kv], `${qkv}.bias`, q + kv);
    }
    add(`${p}.self_attn.o_proj.weight`, [H, q], `${p}.self_attn.o_proj.weight`);
    if (cfg.oProjBias) add(`${p}.self_attn.o_proj.bias`, [H], `${p}.self_attn.o_proj.bias`);
    const gu = `${p}.mlp.gate_up_proj`;
    add(`${p}.mlp.gate_proj.weight`, [I, H], `${gu}.weight`, 0);
    add(`${p}.mlp.up_proj.weight`, [I, H], `${gu}.weight`, I);
    add(`${p}.mlp.down_proj.weight`, [H, I], `${p}.mlp.down_proj.weight`);
    if (cfg.mlpBias) {
      add(`${p}.mlp.gate_proj.bias`, [I], `${gu}.bias`, 0);
      add(`${p}.mlp.up_proj.bias`, [I], `${gu}.bias`, I);
      add(`${p}.mlp.down_proj.bias`, [H], `${p}.mlp.down_proj.bias`);
    }
    add(`${p}.input_layernorm.weight`, [H], `${p}.input_layernorm.weight`, 0, 'norm');
    add(`${p}.post_attention_layernorm.weight`, [H], `${p}.post_attention_layernorm.weight`, 0, 'norm');
  }
  add('model.norm.weight', [H], 'model.norm.weight', 0, 'norm');
  // Tied: the LM head is filled from the embedding (vLLM's tie_weights); lm_head.weight is not in the checkpoint.
  add(cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight', [cfg.vocabSize, H], 'lm_head.linear.weight');
  return out;
}

/** Names a checkpoint may hold that the model does not use. */
const IGNORED = [/\.rotary_emb\.inv_freq$/];

/** Our parameters that are computed, not loaded. */
const COMPUTED = /(^|\.)cos_sin_cache$/;

function paramMap(model: Module): Map<string, Tensor> {
  return new Map(model.namedParameters().filter(([k]) => !COMPUTED.test(k)));
}

function checkCoverage(map: readonly WeightMapping[], params: Map<string, Tensor>): void {
  const covered = new Set(map.map((m) => m.target));
  const missing = [...params.keys()].filter((k) => !covered.has(k));
  if (missing.length) throw new Error(`weight map does not cover parameters [${missing.join(', ')}] (a candidate with other parameter names?)`);
  for (const m of map) if (!params.has(m.target)) throw new Error(`weight map targets '${m.target}', which the model does not have`);
}

/** Write host values (float64) into rows of a parameter. */
function writeRows(param: Tensor, rowOffset: number, values: ArrayLike<number>, shape: readonly number[]): void {
  const src = Tensor.fromArray(param.backend, values, shape, param.dtype, { device: param.device });
  const dst = param.narrow(0, rowOffset, shape[0]!);
  dst.copy_(src);
  dst.dispose();
  src.dispose();
}

/**
 * Load a checkpoint folder into a built Llama model, tensor by tensor: each HF tensor's bytes are streamed
 * from the file into its rows of our parameter (directly when the dtypes match, else through a staging
 * tensor of the file's dtype and a device-side conversion). Checks every expected tensor is present with its
 * shape and a float dtype, and that the checkpoint holds nothing unexpected.
 */
export function loadLlamaWeights(model: Module, cfg: LlamaConfig, dir: string): void {
  const ckpt = Checkpoint.open(dir);
  try {
    const map = llamaWeightMap(cfg);
    const params = paramMap(model);
    checkCoverage(map, params);
    // Validate everything before writing anything.
    for (const m of map) {
      if (!ckpt.has(m.hfName)) {
        throw new UserError(`checkpoint ${dir} is missing tensor '${m.hfName}' (${formatShape(m.shape)}, for ${m.target})`, {
          field: m.hfName,
          fix: m.hfName === 'lm_head.weight' ? 'set "tie_word_embeddings": true in config.json if the model shares its embedding' : 'check the checkpoint matches config.json',
        });
      }
      const info = ckpt.info(m.hfName);
      if (!shapesEqual(info.shape, m.shape)) throw new UserError(`tensor '${m.hfName}' in ${info.file} has shape ${formatShape(info.shape)}, expected ${formatShape(m.shape)} from the config`, { field: m.hfName });
      if (!info.dtype || DTYPE_INFO[info.dtype].kind !== 'float') throw new UserError(`tensor '${m.hfName}' in ${info.file} has dtype ${info.stDType}, expected a float dtype (BF16, F16, F32)`, { field: m.hfName });
    }
    const expected = new Set(map.map((m) => m.hfName));
    const unexpected = ckpt.names().filter((n) => !expected.has(n) && !IGNORED.some((r) => r.test(n)) && !(cfg.tieWordEmbeddings && n === 'lm_head.weight'));
    if (unexpected.length) {
      throw new UserError(`checkpoint ${dir} has tensors the ${cfg.modelType} config does not use: ${unexpected.slice(0, 5).map((n) => `'${n}'`).join(', ')}${unexpected.length > 5 ? ` and ${unexpected.length - 5} more` : ''}`, {
        field: unexpected[0],
        fix: 'check num_hidden_layers, attention_bias, mlp_bias and tie_word_embeddings in config.json',
      });
    }
    for (const m of map) {
      const param = params.get(m.target)!;
      const info = ckpt.info(m.hfName);
      const file = ckpt.file(m.hfName);
      const rowElems = m.shape.length === 2 ? m.shape[1]! : 1;
      if (!param.isContiguous()) throw new Error(`parameter ${m.target} is not contiguous`);
      if (info.dtype === param.dtype) {
        file.readInto(m.hfName, param.backend, param.storage, (param.offset + m.rowOffset * rowElems) * param.itemsize);
      } else {
        const staged = Tensor.empty(param.backend, m.shape, info.dtype!, { device: param.device });
        file.readInto(m.hfName, param.backend, staged.storage, 0);
        const dst = param.narrow(0, m.rowOffset, m.shape[0]!);
        dst.copy_(staged);
        dst.dispose();
        staged.dispose();
      }
    }
  } finally {
    ckpt.close();
  }
}

/** A per-tensor seed from the run seed and the tensor name (order-independent, stable). */
function tensorSeed(seed: number, name: string): number {
  let h = fmix32(seed >>> 0);
  for (let i = 0; i < name.length; i++) h = fmix32((h ^ name.charCodeAt(i)) >>> 0);
  return h;
}

/**
 * Seeded values of one HF tensor: matrices N(0, initializer_range^2) (HF's init), norm weights
 * 1 + N(0, initializer_range^2) and biases N(0, initializer_range^2) (HF uses 1 and 0; the noise makes
 * random models exercise every parameter).
 */
export function randomTensorValues(m: Pick<WeightMapping, 'hfName' | 'shape' | 'kind'>, cfg: LlamaConfig, seed: number): Float64Array {
  const rng = new Rng(tensorSeed(seed, m.hfName));
  const v = rng.fillNormal(numel(m.shape), cfg.initializerRange);
  if (m.kind === 'norm') for (let i = 0; i < v.length; i++) v[i]! += 1;
  return v;
}

/** Unique HF tensors of the map (a tied embedding appears once). */
function uniqueTensors(map: readonly WeightMapping[]): WeightMapping[] {
  const seen = new Set<string>();
  return map.filter((m) => (seen.has(m.hfName) ? false : (seen.add(m.hfName), true)));
}

/** Give a built model seeded random weights (the same values init-weights writes for this seed). */
export function initLlamaWeightsRandom(model: Module, cfg: LlamaConfig, seed: number): void {
  const map = llamaWeightMap(cfg);
  const params = paramMap(model);
  checkCoverage(map, params);
  for (const m of map) writeRows(params.get(m.target)!, m.rowOffset, randomTensorValues(m, cfg, seed), m.shape);
}

function encode(values: Float64Array, dtype: DType): Uint8Array {
  const bytes = new Uint8Array(values.length * DTYPE_INFO[dtype].itemsize);
  const acc = elementAccessor(dtype, bytes);
  for (let i = 0; i < values.length; i++) acc.set(i, values[i]!);
  return bytes;
}

/**
 * Write a random checkpoint in HF naming: DIR/config.json (the given raw config, with the dtype recorded as
 * transformers 4 and 5 read it) and DIR/model.safetensors, one tensor generated and written at a time.
 */
export function writeRandomLlamaCheckpoint(outDir: string, rawConfig: Record<string, unknown>, cfg: LlamaConfig, opts: { seed: number; dtype: DType; configPath?: string }): { files: string[]; tensors: number; bytes: number } {
  mkdirSync(outDir, { recursive: true });
  const tensors = uniqueTensors(llamaWeightMap(cfg));
  const entries: WriteEntry[] = tensors.map((m) => ({ name: m.hfName, dtype: opts.dtype, shape: m.shape, bytes: () => encode(randomTensorValues(m, cfg, opts.seed), opts.dtype) }));
  const st = join(outDir, 'model.safetensors');
  writeSafetensors(st, entries, { format: 'pt' });
  const cfgOut = join(outDir, 'config.json');
  const torchName = DTYPE_INFO[opts.dtype].torchName;
  const recorded = rawConfig.dtype ?? rawConfig.torch_dtype;
  if (opts.configPath && recorded === torchName) copyFileSync(opts.configPath, cfgOut);
  else writeFileSync(cfgOut, JSON.stringify({ ...rawConfig, torch_dtype: torchName, ...(rawConfig.dtype !== undefined ? { dtype: torchName } : {}) }, null, 2) + '\n');
  const bytes = tensors.reduce((a, m) => a + numel(m.shape) * DTYPE_INFO[opts.dtype].itemsize, 0);
  return { files: [cfgOut, st], tensors: tensors.length, bytes };
}
