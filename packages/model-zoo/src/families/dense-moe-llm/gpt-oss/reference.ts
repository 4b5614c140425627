/**
 * Float64 references of gpt-oss's MoE block on host arrays, from the parameters by their HF names (`router.weight`,
 * `router.bias`, `experts.gate_up_proj` [E, H, 2I] | `experts.gate_up_proj_blocks` / `_scales` [E, 2I, H/32, 16] /
 * [E, 2I, H/32], `experts.gate_up_proj_bias` [E, 2I], `experts.down_proj` [E, I, H] | `experts.down_proj_blocks` /
 * `_scales` [E, H, I/32, 16] / [E, H, I/32], `experts.down_proj_bias` [E, H]). Written from HF's GptOssTopKRouter /
 * GptOssExperts math in plain loops: router logits, top-k then a softmax over the k, each chosen expert's interleaved
 * gate / up with biases, the clamped SwiGLU (gate <= limit, |up| <= limit, glu = gate sigmoid(1.702 gate),
 * (up + 1) glu), down with bias, the weighted sum. MXFP4 tensors are decoded here with their own table.
 */
import type { HostArray } from '@fastkernels/core';
import { attnGeometry, decoderStackReference, denseAttentionLayer, preNormDecoderLayer, type DenseSeq } from '../reference.js';
import { GPT_OSS_SWIGLU_ALPHA, type GptOssConfig } from './config.js';

type Params = ReadonlyMap<string, HostArray>;

function param(params: Params, name: string): HostArray {
  const p = params.get(name);
  if (!p) throw new Error(`gpt-oss reference: parameter '${name}' missing (have ${[...params.keys()].slice(0, 16).join(', ')} ...)`);
  return p;
}

const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6];

/** OCP MXFP4 decode: blocks [..., G, 16] bytes (low nibble first), scales [..., G] (e8m0, bias 127) -> [..., 32 G]. */
export function decodeMxfp4(blocks: HostArray, scales: HostArray): HostArray {
  const G = blocks.shape[blocks.shape.length - 2]!;
  const rows = scales.data.length / G;
  const out = new Float64Array(rows * G * 32);
  for (let b = 0; b < rows * G; b++) {
    const s = scales.data[b]!;
    const scale = s === 255 ? NaN : Math.pow(2, s - 127);
    for (let j = 0; j < 16; j++) {
      const byte = blocks.data[b * 16 + j]!;
      for (const [n, nib] of [[0, byte & 15], [1, byte >> 4]] as const) out[b * 32 + 2 * j + n] = (nib & 8 ? -1 : 1) * E2M1[nib & 7]! * scale;
    }
  }
  return { shape: [...blocks.shape.slice(0, -2), G * 32], data: out };
}

/** An expert's weight as a function (e, out, in) -> value, from the dense HF layout [E, in, out] or MXFP4 [E, out, in]. */
function expertWeight(params: Params, prefix: string, name: string): (e: number, o: number, i: number) => number {
  const dense = params.get(`${prefix}${name}`);
  if (dense) {
    const [, IN, OUT] = dense.shape as [number, number, number];
    return (e, o, i) => dense.data[(e * IN + i) * OUT + o]!;
  }
  const w = decodeMxfp4(param(params, `${prefix}${name}_blocks`), param(params, `${prefix}${name}_scales`));
  const [, OUT, IN] = w.shape as [number, number, number];
  return (e, o, i) => w.data[(e * OUT + o) * IN + i]!;
}

/** gpt-oss's clamped SwiGLU on one gate / up pair. */
export function gptOssSwiglu(gate: number, up: number, limit: number, alpha = GPT_OSS_SWIGLU_ALPHA): number {
  const g = Math.min(gate, limit);
  const u = Math.min(Math.max(up, -limit), limit);
  return (u + 1) * (g / (1 + Math.exp(-alpha * g)));
}

/** The MoE block (HF GptOssMLP) on x [rows, H]: router logits (with bias), then the experts; returns [rows, H]. */
export function gptOssMoeBlock(x: Float64Array, rows: number, params: Params, prefix: string, topK: number, limit: number, alpha = GPT_OSS_SWIGLU_ALPHA): Float64Array {
  const rw = param(params, `${prefix}router.weight`);
  const rb = param(params, `${prefix}router.bias`);
  const [E, H] = rw.shape as [number, number];
  const logits = new Float64Array(rows * E);
  for (let t = 0; t < rows; t++) {
    for (let e = 0; e < E; e++) {
      let acc = rb.data[e]!;
      for (let h = 0; h < H; h++) acc += rw.data[e * H + h]! * x[t * H + h]!;
      logits[t * E + e] = acc;
    }
  }
  return gptOssExperts(x, logits, rows, params, `${prefix}experts.`, topK, limit, alpha);
}

/**
 * gpt-oss's experts (HF GptOssExperts, dense or MXFP4 tensors under `prefix`) on x [rows, H] routed by logits [rows, E]:
 * top-k (ties: the lower expert) then a softmax over the k values, each chosen expert's clamped SwiGLU MLP, weighted sum.
 */
export function gptOssExperts(x: Float64Array, logits: ArrayLike<number>, rows: number, params: Params, prefix: string, topK: number, limit: number, alpha = GPT_OSS_SWIGLU_ALPHA): Float64Array {
  const gu = expertWeight(params, prefix, 'gate_up_proj');
  const dn = expertWeight(params, prefix, 'down_proj');
  const guBias = param(params, `${prefix}gate_up_proj_bias`);
  const dnBias = param(params, `${prefix}down_proj_bias`);
  const [E, H] = dnBias.shape as [number, number];
  const I = guBias.shape[1]! / 2;
  const out = new Float64Array(rows * H);
  for (let t = 0; t < rows; t++) {
    const xt = x.subarray(t * H, (t + 1) * H);
    const row = Array.from({ length: E }, (_, e) => logits[t * E + e]!);
    const chosen = row.map((v, e) => [v, e] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]).slice(0, topK);
    const mx = chosen[0]![0];
    const ex = chosen.map(([v]) => Math.exp(v - mx));
    const z = ex.reduce((a, b) => a + b, 0);
    chosen.forEach(([, e], j) => {
      const act = new Float64Array(I);
      for (let i = 0; i < I; i++) {
        let g = guBias.data[e * 2 * I + 2 * i]!;
        let u = guBias.data[e * 2 * I + 2 * i + 1]!;
        for (let h = 0; h < H; h++) {
          g += gu(e, 2 * i, h) * xt[h]!;
          u += gu(e, 2 * i + 1, h) * xt[h]!;
        }
        act[i] = gptOssSwiglu(g, u, limit, alpha);
      }
      const wgt = ex[j]! / z;
      for (let h = 0; h < H; h++) {
        let y = dnBias.data[e * H + h]!;
        for (let i = 0; i < I; i++) y += dn(e, h, i) * act[i]!;
        out[t * H + h]! += wgt * y;
      }
    });
  }
  return out;
}

/**
 * A gpt-oss decoder layer over the module tree's parameters (prefix `model.layers.N.` or ''), unfused: residual' =
 * hidden (+ residual); residual'' = residual' + attn(norm(residual')) (biases, YaRN, sinks, the layer's window);
 * returns [moe(norm(residual'')), residual''] as vLLM's layer does.
 */
export function gptOssDecoderLayer(hidden: Float64Array, residual: Float64Array | null, positions: ArrayLike<number>, params: Params, prefix: string, cfg: GptOssConfig, layer: number, seqs: readonly DenseSeq[]): [Float64Array, Float64Array] {
  return preNormDecoderLayer(
    hidden, residual, positions, params, prefix, cfg.rmsNormEps,
    (x) => denseAttentionLayer(x, positions, params, `${prefix}self_attn.`, attnGeometry(cfg, layer), seqs, layer),
    (y) => gptOssMoeBlock(y, positions.length, params, `${prefix}mlp.`, cfg.numExpertsPerTok, cfg.swigluLimit, cfg.swigluAlpha),
  );
}

/** The gpt-oss model's forward: embed, layers, final norm; the final hidden states [T, H]. */
export function gptOssModel(ids: ArrayLike<number>, positions: ArrayLike<number>, params: Params, cfg: GptOssConfig, seqs: readonly DenseSeq[]): Float64Array {
  return decoderStackReference(ids, params, cfg, (h, res, prefix, l) => gptOssDecoderLayer(h, res, positions, params, prefix, cfg, l, seqs));
}
