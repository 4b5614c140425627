/**
 * Llama-family weights: the mapping from HF checkpoint names to our parameters (q/k/v -> merged qkv_proj,
 * gate/up -> merged gate_up_proj, lm_head absent when tied), streaming load into a built model, seeded
 * random init, and writing an HF-named checkpoint (config.json + model.safetensors).
 */
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  DTYPE_INFO,
  Rng,
  Tensor,
  UserError,
  currentTensorParallelGroup,
  elementAccessor,
  fmix32,
  formatShape,
  mergedColumnPartPiece,
  numel,
  qkvPartPiece,
  rowParallelSlice,
  shapesEqual,
  type DType,
  type Module,
  vocabParallelSlice,
  type ShardSlice,
} from '@fastkernels/core';
import type { LlamaConfig } from '../families/dense-moe-llm/config.js';
import { llamaTensorParallelPlan } from '../families/dense-moe-llm/tensor-parallel.js';
import { Checkpoint, writeSafetensors, type WriteEntry } from './safetensors.js';

/**
 * One HF tensor and where it goes: rows [rowOffset, rowOffset + rows) of our parameter `target`, where rows is
 * shape[0], or the slice's length when the slice is along dim 0.
 */
export interface WeightMapping {
  readonly hfName: string;
  /** The tensor's full shape in the checkpoint. */
  readonly shape: readonly number[];
  readonly target: string;
  readonly rowOffset: number;
  readonly kind: 'matrix' | 'norm' | 'bias';
  /** Under tensor parallelism, the part of the tensor this rank holds (the whole tensor when absent). */
  readonly slice?: ShardSlice;
}

/** This process's place in a tensor-parallel group (the whole model at world 1). */
export interface TensorParallelRank {
  readonly rank: number;
  readonly world: number;
}
const SINGLE_RANK: TensorParallelRank = { rank: 0, world: 1 };

/** The shape of the values a mapping writes: the full shape, or the slice's. */
export function mappedShape(m: Pick<WeightMapping, 'shape' | 'slice'>): number[] {
  const shape = [...m.shape];
  if (m.slice) shape[m.slice.dim] = m.slice.length;
  return shape;
}

/**
 * Every HF tensor a Llama/Qwen2/Mistral checkpoint holds for a config, with its destination. With a tensor-parallel
 * rank of world W > 1, each tensor carries the slice that rank holds, cut as the modules split themselves
 * (families/dense-moe-llm/tensor-parallel.ts; core's shard arithmetic): q/k/v rows by heads, o_proj and down_proj
 * columns, gate/up rows, the embedding's and the LM head's vocabulary rows when they are vocab-parallel (the same rows:
 * a tied head reads them from model.embed_tokens.weight too); the norms and the row-parallel biases whole. At world 1
 * the map is exactly the unsharded one.
 */
export function llamaWeightMap(cfg: LlamaConfig, tp: TensorParallelRank = SINGLE_RANK): WeightMapping[] {
  const H = cfg.hiddenSize;
  const D = cfg.headDim;
  const q = cfg.numAttentionHeads * D;
  const kv = cfg.numKeyValueHeads * D;
  const I = cfg.intermediateSize;
  const out: WeightMapping[] = [];
  const add = (hfName: string, shape: number[], target: string, rowOffset = 0, kind: WeightMapping['kind'] = shape.length === 2 ? 'matrix' : 'bias', slice?: ShardSlice) =>
    out.push({ hfName, shape, target, rowOffset, kind, ...(slice ? { slice } : {}) });
  const plan = tp.world > 1 ? llamaTensorParallelPlan(cfg, tp) : null;
  // Where a part of a fused parameter goes: the whole part at its offset at world 1, the rank's rows of it otherwise.
  type Piece = { rowOffset: number; slice?: ShardSlice };
  const qkvPart = (part: 'q' | 'k' | 'v', w1Offset: number): Piece => {
    if (!plan) return { rowOffset: w1Offset };
    const p = qkvPartPiece(plan.heads, part, tp.rank);
    return { rowOffset: p.rowOffset, slice: p };
  };
  const gateUpPart = (index: number): Piece => {
    if (!plan) return { rowOffset: index * I };
    const p = mergedColumnPartPiece([I, I], index, tp.rank, tp.world);
    return { rowOffset: p.rowOffset, slice: p };
  };
  const rowParallel = (cols: number) => (plan ? rowParallelSlice(cols, tp.rank, tp.world) : undefined);
  const addPart = (hfName: string, shape: number[], target: string, piece: Piece) => add(hfName, shape, target, piece.rowOffset, shape.length === 2 ? 'matrix' : 'bias', piece.slice);

  const embedRows = plan?.vocabParallelEmbedding ? vocabParallelSlice(cfg.vocabSize, tp.rank, tp.world) : undefined;
  add('model.embed_tokens.weight', [cfg.vocabSize, H], 'model.embed_tokens.weight', 0, 'matrix', embedRows);
  for (let l = 0; l < cfg.numHiddenLayers; l++) {
    const p = `model.layers.${l}`;
    const qkv = `${p}.self_attn.qkv_proj`;
    const parts = [['q', q, 0], ['k', kv, q], ['v', kv, q + kv]] as const;
    for (const [part, rows, w1Offset] of parts) addPart(`${p}.self_attn.${part}_proj.weight`, [rows, H], `${qkv}.weight`, qkvPart(part, w1Offset));
    if (cfg.qkvBias) for (const [part, rows, w1Offset] of parts) addPart(`${p}.self_attn.${part}_proj.bias`, [rows], `${qkv}.bias`, qkvPart(part, w1Offset));
    add(`${p}.self_attn.o_proj.weight`, [H, q], `${p}.self_attn.o_proj.weight`, 0, 'matrix', rowParallel(q));
    if (cfg.oProjBias) add(`${p}.self_attn.o_proj.bias`, [H], `${p}.self_attn.o_proj.bias`);
    const gu = `${p}.mlp.gate_up_proj`;
    addPart(`${p}.mlp.gate_proj.weight`, [I, H], `${gu}.weight`, gateUpPart(0));
    addPart(`${p}.mlp.up_proj.weight`, [I, H], `${gu}.weight`, gateUpPart(1));
    add(`${p}.mlp.down_proj.weight`, [H, I], `${p}.mlp.down_proj.weight`, 0, 'matrix', rowParallel(I));
    if (cfg.mlpBias) {
      addPart(`${p}.mlp.gate_proj.bias`, [I], `${gu}.bias`, gateUpPart(0));
      addPart(`${p}.mlp.up_proj.bias`, [I], `${gu}.bias`, gateUpPart(1));
      add(`${p}.mlp.down_proj.bias`, [H], `${p}.mlp.down_proj.bias`);
    }
    add(`${p}.input_layernorm.weight`, [H], `${p}.input_layernorm.weight`, 0, 'norm');
    add(`${p}.post_attention_layernorm.weight`, [H], `${p}.post_attention_layernorm.weight`, 0, 'norm');
  }
  add('model.norm.weight', [H], 'model.norm.weight', 0, 'norm');
  // Tied: the LM head is filled from the embedding (vLLM's tie_weights); lm_head.weight is not in the checkpoint.
  const head = plan?.vocabParallelHead ? vocabParallelSlice(cfg.vocabSize, tp.rank, tp.world) : undefined;
  add(cfg.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight', [cfg.vocabSize, H], 'lm_head.linear.weight', 0, 'matrix', head);
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

/**
 * A sharded mapping's values must fit its parameter (a module that split itself otherwise would be written out of
 * bounds), and fill it when they are all the parameter gets (a module holding the whole table where the map cuts this
 * rank's vocabulary rows would otherwise keep rows it never loaded).
 */
function checkFits(m: WeightMapping, param: Tensor, map: readonly WeightMapping[]): void {
  if (!m.slice) return;
  const shape = mappedShape(m);
  const only = map.every((o) => o === m || o.target !== m.target);
  const rows = only ? shape[0] === param.shape[0] : m.rowOffset + shape[0]! <= param.shape[0]!;
  const fits = param.shape.length === shape.length && rows && shape.slice(1).every((n, i) => n === param.shape[i + 1]);
  if (!fits) throw new Error(`'${m.hfName}': this rank's slice ${formatShape(shape)} at row ${m.rowOffset} does not fit ${m.target} ${formatShape(param.shape)} (the module splits itself differently?)`);
}

/** The values of `slice` from the full tensor's values (row-major), in the slice's own row-major order. */
function sliceValues(values: Float64Array, shape: readonly number[], slice: ShardSlice): Float64Array {
  const inner = shape.slice(1).reduce((a, b) => a * b, 1);
  if (slice.dim === 0) return values.subarray(slice.start * inner, (slice.start + slice.length) * inner);
  const [rows, cols] = shape as [number, number];
  const out = new Float64Array(rows * slice.length);
  for (let r = 0; r < rows; r++) out.set(values.subarray(r * cols + slice.start, r * cols + slice.start + slice.length), r * slice.length);
  return out;
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
export function loadLlamaWeights(model: Module, cfg: LlamaConfig, dir: string, tp: TensorParallelRank = currentTensorParallelGroup()): void {
  const ckpt = Checkpoint.open(dir);
  try {
    const map = llamaWeightMap(cfg, tp);
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
    for (const m of map) checkFits(m, params.get(m.target)!, map);
    for (const m of map) {
      const param = params.get(m.target)!;
      const info = ckpt.info(m.hfName);
      const file = ckpt.file(m.hfName);
      const shape = mappedShape(m);
      const rowElems = shape.length === 2 ? shape[1]! : 1;
      if (!param.isContiguous()) throw new Error(`parameter ${m.target} is not contiguous`);
      // A rank of a tensor-parallel group reads only its slice of each tensor.
      const read = (dst: Tensor['storage'], byteOffset: number) =>
        m.slice ? file.readSliceInto(m.hfName, m.slice, param.backend, dst, byteOffset) : file.readInto(m.hfName, param.backend, dst, byteOffset);
      if (info.dtype === param.dtype) {
        read(param.storage, (param.offset + m.rowOffset * rowElems) * param.itemsize);
      } else {
        const staged = Tensor.empty(param.backend, shape, info.dtype!, { device: param.device });
        read(staged.storage, 0);
        const dst = param.narrow(0, m.rowOffset, shape[0]!);
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

/**
 * Give a built model seeded random weights (the same values init-weights writes for this seed); a tensor-parallel
 * rank draws each whole tensor (one at a time) and keeps its slice, so every rank holds a shard of the same model.
 */
export function initLlamaWeightsRandom(model: Module, cfg: LlamaConfig, seed: number, tp: TensorParallelRank = currentTensorParallelGroup()): void {
  const map = llamaWeightMap(cfg, tp);
  const params = paramMap(model);
  checkCoverage(map, params);
  for (const m of map) checkFits(m, params.get(m.target)!, map);
  for (const m of map) {
    const values = randomTensorValues(m, cfg, seed);
    writeRows(params.get(m.target)!, m.rowOffset, m.slice ? sliceValues(values, m.shape, m.slice) : values, mappedShape(m));
  }
}

/** Elements of the device pools of initLlamaWeightsOnDevice (a prime, so tiles do not line up with rows). */
export const DEVICE_INIT_POOL = 4_194_301;

/**
 * Seeded random weights filled on the device, for models too big to draw on the host (Llama-3-8B: 8e9 values;
 * the host path takes minutes). Two pools of DEVICE_INIT_POOL values are drawn on the host once
 * (N(0, initializer_range^2) for matrices and biases, 1 + N(0, initializer_range^2) for norm weights), uploaded
 * in the model dtype, and each tensor is tiled from its pool by device copies, starting at an offset hashed
 * from the seed and the HF name and jumping by another prime after each tile. Same distribution and scale as
 * initLlamaWeightsRandom, but not the same values (and periodic over the pool): for speed benchmarks and smoke
 * runs, not for parity with a checkpoint. Tied embeddings get identical rows (the same name, hence offset).
 */
export function initLlamaWeightsOnDevice(model: Module, cfg: LlamaConfig, seed: number): { tensors: number; copies: number } {
  const world = currentTensorParallelGroup().world;
  if (world > 1) {
    // The pools tile whole tensors; a rank's slice of that tiling is not implemented.
    throw new UserError(`device random init fills whole tensors; under tensor parallelism (${world} ranks) use a checkpoint or host random init`, {
      field: '--random-init',
      fix: 'write a checkpoint with `fastkernels init-weights` and pass it with --model, or use --random-init host',
    });
  }
  const map = llamaWeightMap(cfg);
  const params = paramMap(model);
  checkCoverage(map, params);
  const first = params.values().next().value as Tensor | undefined;
  if (!first) return { tensors: 0, copies: 0 };
  const { backend, device, dtype } = first;
  const N = poolSize(map);
  const draw = (kind: WeightMapping['kind']) => {
    const v = poolValues(cfg, seed, N, kind);
    const t = Tensor.empty(backend, [N], dtype, { device });
    if (dtype === 'bf16' || dtype === 'f32') backend.write(t.storage, t.offset * t.itemsize, encodeValues(v, dtype));
    else {
      const src = Tensor.fromArray(backend, v, [N], dtype, { device });
      t.copy_(src);
      src.dispose();
    }
    return t;
  };
  const pools = { matrix: draw('matrix'), bias: draw('bias'), norm: draw('norm') };
  let copies = 0;
  try {
    for (const m of map) {
      const param = params.get(m.target)!;
      if (param.backend !== backend || param.device !== device) throw new Error(`initLlamaWeightsOnDevice: ${m.target} is on another backend or device`);
      const rows = param.narrow(0, m.rowOffset, m.shape[0]!);
      const flat = rows.isContiguous() ? rows.view([rows.numel]) : null;
      if (!flat) throw new Error(`initLlamaWeightsOnDevice: rows of ${m.target} are not contiguous`);
      const pool = pools[m.kind];
      let off = 0;
      for (const [start, len] of poolSegments(m, seed, N)) {
        const dst = flat.narrow(0, off, len);
        const src = pool.narrow(0, start, len);
        dst.copy_(src);
        dst.dispose();
        src.dispose();
        copies++;
        off += len;
      }
      flat.dispose();
      rows.dispose();
    }
  } finally {
    for (const p of Object.values(pools)) p.dispose();
  }
  return { tensors: map.length, copies };
}

/** The pool length for a model: DEVICE_INIT_POOL, or less when no tensor is that long. */
function poolSize(map: readonly Pick<WeightMapping, 'shape'>[]): number {
  return Math.max(1, Math.min(DEVICE_INIT_POOL, ...map.map((m) => numel(m.shape))));
}

const POOL_SALT: Readonly<Record<WeightMapping['kind'], number>> = { matrix: 0x6d617472, bias: 0x62696173, norm: 0x6e6f726d };

/** The seeded pool of one kind: N(0, initializer_range^2) values (norm weights: 1 + that). */
function poolValues(cfg: LlamaConfig, seed: number, N: number, kind: WeightMapping['kind']): Float64Array {
  const v = new Rng(fmix32((seed ^ POOL_SALT[kind]) >>> 0)).fillNormal(N, cfg.initializerRange);
  if (kind === 'norm') for (let i = 0; i < N; i++) v[i]! += 1;
  return v;
}

/** How a tensor is tiled from its pool: [pool offset, length] runs, in order, from a per-tensor rotation. */
function poolSegments(m: Pick<WeightMapping, 'hfName' | 'shape'>, seed: number, N: number): [number, number][] {
  const out: [number, number][] = [];
  const total = numel(m.shape);
  let rot = tensorSeed(seed, m.hfName) % N;
  for (let off = 0; off < total; ) {
    const len = Math.min(total - off, N - rot);
    out.push([rot, len]);
    off += len;
    rot = (rot + 1_048_573) % N;
  }
  return out;
}

/**
 * Write the checkpoint initLlamaWeightsOnDevice's model would hold: each tensor tiled from three seeded pools of
 * DEVICE_INIT_POOL values, so a Llama-3-8B checkpoint takes seconds to assemble (drawing 8 billion values on the
 * host takes minutes). The values repeat with that period, which is fine for timing and for comparing runs.
 */
export function writeTiledLlamaCheckpoint(outDir: string, rawConfig: Record<string, unknown>, cfg: LlamaConfig, opts: { seed: number; dtype: DType; configPath?: string }): { files: string[]; tensors: number; bytes: number } {
  const map = llamaWeightMap(cfg);
  const N = poolSize(map);
  const item = DTYPE_INFO[opts.dtype].itemsize;
  const pools = new Map<WeightMapping['kind'], Uint8Array>();
  const pool = (kind: WeightMapping['kind']) => {
    let b = pools.get(kind);
    if (!b) pools.set(kind, (b = encodeValues(poolValues(cfg, opts.seed, N, kind), opts.dtype)));
    return b;
  };
  return writeCheckpoint(outDir, rawConfig, uniqueTensors(map), opts, (m) => {
    const src = pool(m.kind);
    const out = new Uint8Array(numel(m.shape) * item);
    let off = 0;
    for (const [start, len] of poolSegments(m, opts.seed, N)) {
      out.set(src.subarray(start * item, (start + len) * item), off * item);
      off += len;
    }
    return out;
  });
}

/**
 * Host values to little-endian bytes of `dtype`. f32 and bf16 take fast paths (a Float32Array's rounding; bf16 by
 * round-to-nearest-even on the float32 bits, corrected where the float32 rounding landed exactly on a bf16 tie, so
 * the result is the single rounding of the float64 value that core's numberToBf16 gives); others use the accessor.
 */
export function encodeValues(values: Float64Array, dtype: DType): Uint8Array {
  const n = values.length;
  if (dtype === 'f32') return new Uint8Array(Float32Array.from(values).buffer);
  if (dtype === 'bf16') {
    const f = Float32Array.from(values);
    const u = new Uint32Array(f.buffer);
    const out = new Uint16Array(n);
    for (let i = 0; i < n; i++) {
      const b = u[i]!;
      const x = values[i]!;
      const fi = f[i]!;
      if ((b & 0x7f800000) === 0x7f800000) {
        // inf or NaN after rounding to float32: overflow keeps the sign's infinity, NaN stays a quiet NaN
        out[i] = x !== x ? 0x7fc0 : (b >>> 16) & 0xff80;
      } else if ((b & 0xffff) === 0x8000 && fi !== x) {
        // float32 rounding landed on a bf16 tie: x itself is above or below it in magnitude
        out[i] = Math.abs(x) > Math.abs(fi) ? (b >>> 16) + 1 : b >>> 16;
      } else {
        out[i] = ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
      }
    }
    return new Uint8Array(out.buffer);
  }
  const bytes = new Uint8Array(n * DTYPE_INFO[dtype].itemsize);
  const acc = elementAccessor(dtype, bytes);
  for (let i = 0; i < n; i++) acc.set(i, values[i]!);
  return bytes;
}

/**
 * Write a random checkpoint in HF naming: DIR/config.json (the given raw config, with the dtype recorded as
 * transformers 4 and 5 read it) and DIR/model.safetensors, one tensor generated and written at a time.
 */
export function writeRandomLlamaCheckpoint(outDir: string, rawConfig: Record<string, unknown>, cfg: LlamaConfig, opts: { seed: number; dtype: DType; configPath?: string }): { files: string[]; tensors: number; bytes: number } {
  return writeCheckpoint(outDir, rawConfig, uniqueTensors(llamaWeightMap(cfg)), opts, (m) => encodeValues(randomTensorValues(m, cfg, opts.seed), opts.dtype));
}

/** DIR/model.safetensors from per-tensor bytes (made one tensor at a time), and DIR/config.json with the dtype recorded. */
function writeCheckpoint(outDir: string, rawConfig: Record<string, unknown>, tensors: readonly WeightMapping[], opts: { dtype: DType; configPath?: string }, bytesOf: (m: WeightMapping) => Uint8Array): { files: string[]; tensors: number; bytes: number } {
  mkdirSync(outDir, { recursive: true });
  const entries: WriteEntry[] = tensors.map((m) => ({ name: m.hfName, dtype: opts.dtype, shape: m.shape, bytes: () => bytesOf(m) }));
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
