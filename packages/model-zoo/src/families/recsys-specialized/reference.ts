/**
 * Float64 references of the BERT / XLM-RoBERTa encoder and the BGE-M3 / ColBERT heads on host arrays, transcribed
 * from HF's modeling_xlm_roberta.py / modeling_bert.py (eager path) and FlagEmbedding's BGEM3 heads with plain loops:
 * nothing here calls the modules under test or an op. Layout: packed tokens (every sequence back to back, no
 * padding), ids [T], states [T, H], cu_seqlens [B + 1] the sequences' offsets.
 */
import type { HostArray } from '@fastkernels/core';
import type { EncoderConfig } from './config.js';

type Params = ReadonlyMap<string, HostArray>;

function param(params: Params, name: string): HostArray {
  const p = params.get(name);
  if (!p) throw new Error(`reference: parameter '${name}' missing (have ${[...params.keys()].slice(0, 12).join(', ')}, ...)`);
  return p;
}

/** y[r] = x[r] W^T + b for x [rows, K], W [N, K]. */
export function refLinear(x: Float64Array, rows: number, w: HostArray, b: HostArray | null): Float64Array {
  const [n, k] = w.shape as [number, number];
  const y = new Float64Array(rows * n);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < n; j++) {
      let acc = b ? b.data[j]! : 0;
      for (let p = 0; p < k; p++) acc += x[r * k + p]! * w.data[j * k + p]!;
      y[r * n + j] = acc;
    }
  }
  return y;
}

/** LayerNorm over rows of width h (biased variance). */
export function refLayerNorm(x: Float64Array, h: number, w: HostArray, b: HostArray, eps: number): Float64Array {
  const y = new Float64Array(x.length);
  for (let r = 0; r < x.length / h; r++) {
    let mean = 0;
    for (let j = 0; j < h; j++) mean += x[r * h + j]!;
    mean /= h;
    let v = 0;
    for (let j = 0; j < h; j++) v += (x[r * h + j]! - mean) ** 2;
    const inv = 1 / Math.sqrt(v / h + eps);
    for (let j = 0; j < h; j++) y[r * h + j] = (x[r * h + j]! - mean) * inv * w.data[j]! + b.data[j]!;
  }
  return y;
}

function erf(x: number): number {
  // Abramowitz-Stegun 7.1.26 is too coarse for a golden check; use the series / continued fraction pair.
  const ax = Math.abs(x);
  if (ax < 2.5) {
    let sum = 0;
    let term = ax;
    for (let n = 0; n < 200; n++) {
      const t = term / (2 * n + 1);
      sum += t;
      term *= (-ax * ax) / (n + 1);
      if (Math.abs(t) < 1e-17 * Math.abs(sum)) break;
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc continued fraction (Lentz) for |x| >= 2.5
  let f = ax;
  let c = ax;
  let d = 0;
  for (let i = 1; i < 300; i++) {
    const a = i / 2;
    d = ax + a * d;
    d = 1 / d;
    c = ax + a / c;
    const delta = c * d;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  const erfc = Math.exp(-ax * ax) / (f * Math.sqrt(Math.PI));
  return Math.sign(x) * (1 - erfc);
}

/** HF ACT2FN['gelu'] (erf) or gelu_new / gelu_pytorch_tanh. */
export function refGelu(x: number, act: EncoderConfig['hiddenAct']): number {
  if (act === 'gelu_tanh') return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
  return 0.5 * x * (1 + erf(x / Math.SQRT2));
}

/**
 * HF's position ids of each packed sequence on its own: RoBERTa's create_position_ids_from_input_ids (padding_idx + 1 +
 * the running count of non-pad tokens, padding_idx at a pad) or BERT's arange; the absolute rows of the position table.
 */
export function refPositionIds(ids: ArrayLike<number>, cu: ArrayLike<number>, cfg: EncoderConfig): number[] {
  const pos: number[] = [];
  for (let b = 0; b + 1 < cu.length; b++) {
    let count = 0;
    for (let t = cu[b]!; t < cu[b + 1]!; t++) {
      if (!cfg.robertaPositions) pos.push(t - cu[b]!);
      else if (ids[t] !== cfg.padTokenId) pos.push(++count + cfg.padTokenId);
      else pos.push(cfg.padTokenId);
    }
  }
  return pos;
}

/**
 * BertEmbeddings / XLMRobertaEmbeddings on packed tokens: word + token_type (ids 0 unless given) + position at the
 * absolute rows `positionRows` [T], then LayerNorm.
 */
export function refEmbeddings(ids: ArrayLike<number>, positionRows: ArrayLike<number>, params: Params, cfg: EncoderConfig, prefix = '', typeIds?: ArrayLike<number>): Float64Array {
  const H = cfg.hiddenSize;
  const T = ids.length;
  const word = param(params, `${prefix}word_embeddings.weight`);
  const posW = param(params, `${prefix}position_embeddings.weight`);
  const type = param(params, `${prefix}token_type_embeddings.weight`);
  const x = new Float64Array(T * H);
  for (let t = 0; t < T; t++) {
    const id = ids[t]!;
    const tt = typeIds ? typeIds[t]! : 0;
    for (let j = 0; j < H; j++) x[t * H + j] = word.data[id * H + j]! + type.data[tt * H + j]! + posW.data[positionRows[t]! * H + j]!;
  }
  return refLayerNorm(x, H, param(params, `${prefix}LayerNorm.weight`), param(params, `${prefix}LayerNorm.bias`), cfg.layerNormEps);
}

/**
 * XLMRobertaAttention (self + output) on packed tokens [T, H]: per sequence (cu_seqlens) and head, softmax(q k^T /
 * sqrt(d)) v over that sequence's tokens only (bidirectional), then dense and LayerNorm(out + x).
 */
export function refAttention(x: Float64Array, cu: ArrayLike<number>, params: Params, cfg: EncoderConfig, prefix = ''): Float64Array {
  const H = cfg.hiddenSize;
  const nH = cfg.numAttentionHeads;
  const d = cfg.headDim;
  const T = x.length / H;
  const lin = (name: string, inp: Float64Array) => refLinear(inp, T, param(params, `${prefix}${name}.weight`), param(params, `${prefix}${name}.bias`));
  const q = lin('self.query', x);
  const k = lin('self.key', x);
  const v = lin('self.value', x);
  const ctx = new Float64Array(T * H);
  const scale = 1 / Math.sqrt(d);
  for (let b = 0; b + 1 < cu.length; b++) {
    const [t0, t1] = [cu[b]!, cu[b + 1]!];
    const scores = new Float64Array(t1 - t0);
    for (let h = 0; h < nH; h++) {
      for (let i = t0; i < t1; i++) {
        let max = -Infinity;
        for (let j = t0; j < t1; j++) {
          let dot = 0;
          for (let e = 0; e < d; e++) dot += q[i * H + h * d + e]! * k[j * H + h * d + e]!;
          scores[j - t0] = dot * scale;
          max = Math.max(max, dot * scale);
        }
        let sum = 0;
        for (let j = 0; j < scores.length; j++) {
          scores[j] = Math.exp(scores[j]! - max);
          sum += scores[j]!;
        }
        for (let e = 0; e < d; e++) {
          let acc = 0;
          for (let j = t0; j < t1; j++) acc += scores[j - t0]! * v[j * H + h * d + e]!;
          ctx[i * H + h * d + e] = acc / sum;
        }
      }
    }
  }
  const o = lin('output.dense', ctx);
  for (let t = 0; t < o.length; t++) o[t] = o[t]! + x[t]!;
  return refLayerNorm(o, H, param(params, `${prefix}output.LayerNorm.weight`), param(params, `${prefix}output.LayerNorm.bias`), cfg.layerNormEps);
}

/** XLMRobertaIntermediate + XLMRobertaOutput: LayerNorm(dense2(act(dense1(x))) + x); `inter` / `out` name the two. */
export function refMlp(x: Float64Array, rows: number, params: Params, cfg: EncoderConfig, inter = 'intermediate.', out = 'output.'): Float64Array {
  const a = refLinear(x, rows, param(params, `${inter}dense.weight`), param(params, `${inter}dense.bias`)).map((y) => refGelu(y, cfg.hiddenAct));
  const o = refLinear(a, rows, param(params, `${out}dense.weight`), param(params, `${out}dense.bias`));
  for (let t = 0; t < o.length; t++) o[t] = o[t]! + x[t]!;
  return refLayerNorm(o, cfg.hiddenSize, param(params, `${out}LayerNorm.weight`), param(params, `${out}LayerNorm.bias`), cfg.layerNormEps);
}

/** XLMRobertaLayer / BertLayer on packed tokens. */
export function refLayer(x: Float64Array, cu: ArrayLike<number>, params: Params, cfg: EncoderConfig, prefix = ''): Float64Array {
  const a = refAttention(x, cu, params, cfg, `${prefix}attention.`);
  return refMlp(a, a.length / cfg.hiddenSize, params, cfg, `${prefix}intermediate.`, `${prefix}output.`);
}

/** XLMRobertaEncoder: the layers `${prefix}layer.<i>.` in order. */
export function refEncoder(x: Float64Array, cu: ArrayLike<number>, params: Params, cfg: EncoderConfig, prefix = ''): Float64Array {
  let h = x;
  for (let l = 0; l < cfg.numHiddenLayers; l++) h = refLayer(h, cu, params, cfg, `${prefix}layer.${l}.`);
  return h;
}

/**
 * XLMRobertaModel / BertModel last_hidden_state [T, H] of packed ids [T] with HF's positions of each sequence alone
 * (refPositionIds: what HF computes for an unpadded row); the pooler is not run (the embedding heads do not read it).
 */
export function refModel(ids: ArrayLike<number>, cu: ArrayLike<number>, params: Params, cfg: EncoderConfig, prefix = ''): Float64Array {
  const e = refEmbeddings(ids, refPositionIds(ids, cu, cfg), params, cfg, `${prefix}embeddings.`);
  return refEncoder(e, cu, params, cfg, `${prefix}encoder.`);
}

/** F.normalize(v, dim=-1) on rows of width n (eps 1e-12). */
export function refNormalizeRows(x: Float64Array, n: number): Float64Array {
  const y = new Float64Array(x.length);
  for (let r = 0; r < x.length / n; r++) {
    let ss = 0;
    for (let j = 0; j < n; j++) ss += x[r * n + j]! ** 2;
    const norm = Math.max(Math.sqrt(ss), 1e-12);
    for (let j = 0; j < n; j++) y[r * n + j] = x[r * n + j]! / norm;
  }
  return y;
}

/**
 * FlagEmbedding's BGEM3 heads on packed last_hidden_state [T, H]: dense = normalize(h[cu[b]]) [B, H] (each sequence's
 * CLS row); sparse = relu(sparse_linear(h)) [T]; colbert = normalize(colbert_linear(h)) [T, C] for every token (the
 * CLS rows included: vLLM filters them after the projection, FlagEmbedding projects h[:, 1:]; the rows kept agree).
 */
export function refBgeM3Heads(h: Float64Array, cu: ArrayLike<number>, H: number, params: Params): { dense: Float64Array; sparse: Float64Array; colbert: Float64Array } {
  const T = h.length / H;
  const B = cu.length - 1;
  const cls = new Float64Array(B * H);
  for (let b = 0; b < B; b++) cls.set(h.subarray(cu[b]! * H, (cu[b]! + 1) * H), b * H);
  const sparse = refLinear(h, T, param(params, 'sparse_linear.weight'), param(params, 'sparse_linear.bias')).map((w) => Math.max(w, 0));
  const cw = param(params, 'colbert_linear.weight');
  const cv = refLinear(h, T, cw, param(params, 'colbert_linear.bias'));
  return { dense: refNormalizeRows(cls, H), sparse, colbert: refNormalizeRows(cv, cw.shape[0]!) };
}
