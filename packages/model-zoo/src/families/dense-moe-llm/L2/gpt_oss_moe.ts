import { DTYPE_INFO, Module, OpScope, Tensor, currentTensorParallelGroup, defineTask, deviceArange, hostArray, type ChainStep, type Rng, type TaskCase, type TensorParallelGroup } from '@fastkernels/core';
import { currentExpertParallel, expertParallelRange } from '../../../layers/parallel/expert-parallel.js';
import { bytesOf, randn } from '../../../common/inputs.js';
import { FAMILY } from '../family.js';
import type { GateLinear } from '../../../tasks/L1/moe/gate_linear.js';
import type { TopKSoftmax } from '../../../tasks/L1/moe/topk_softmax.js';
import { MOE_TOKENS } from '../../../tasks/L1/moe/shapes.js';
import { GPT_OSS_120B_CONFIG, GPT_OSS_20B_CONFIG, GPT_OSS_SWIGLU_ALPHA, type GptOssConfig } from '../gpt-oss/config.js';
import { gptOssMoeBlock } from '../gpt-oss/reference.js';

export type GptOssExpertsFormat = GptOssConfig['expertsFormat'];

/**
 * gpt-oss's experts (HF GptOssExperts; vLLM's FusedMoE with biases and activation 'swigluoai') under the checkpoint's
 * names, in one of its two forms:
 * - 'dense' (HF's dequantized checkpoints): gate_up_proj [E, H, 2I] (x @ W, gate and up interleaved along 2I),
 *   gate_up_proj_bias [E, 2I], down_proj [E, I, H], down_proj_bias [E, H];
 * - 'mxfp4' (the released checkpoints): gate_up_proj_blocks u8 [E, 2I, H/32, 16] + gate_up_proj_scales u8 [E, 2I, H/32]
 *   (rows = outputs), down_proj_blocks [E, H, I/32, 16] + down_proj_scales [E, H, I/32], the two biases as above.
 * forward(hiddenStates [T, H], routerLogits f32 [T, E]) -> [T, H], as vLLM's FusedMoE takes them: routing (L1/topk_softmax,
 * renormalised: the softmax over the top-k logits HF takes equals softmax, top-k and renormalise), each token row
 * repeated per choice, grouped_gemm (mxfp4_grouped_gemm) with gate_up and its bias, gate = [..., ::2], up = [..., 1::2],
 * the clamped SwiGLU (gate <= limit, -limit <= up <= limit, (up + 1) * gate * sigmoid(alpha gate): quick_gelu is that
 * product at gpt-oss's alpha 1.702), grouped_gemm with down and its bias, weighted by the router and summed over the k.
 * The MXFP4 form is the task L2/mxfp4_moe (Mxfp4MoE below), which GptOssMoE builds through the registry; the dense form
 * is GptOssMoE's own child.
 *
 * Expert parallelism (layers/parallel/expert-parallel.ts on, a group of W > 1 ranks): the parameters hold this rank's
 * E / W experts (the checkpoint tensors' rows [r E / W, (r + 1) E / W)); every rank routes every (replicated) token,
 * another rank's choices get expert id -1 (grouped_gemm's zero row) and router weight 0, and the parts are summed by
 * one all-reduce, as FusedMoE does.
 */
export class GptOssExperts extends Module {
  readonly gateUpProjBias: Tensor;
  readonly downProjBias: Tensor;
  /** dense form */
  readonly gateUpProj: Tensor | null = null;
  readonly downProj: Tensor | null = null;
  /** MXFP4 form */
  readonly gateUpProjBlocks: Tensor | null = null;
  readonly gateUpProjScales: Tensor | null = null;
  readonly downProjBlocks: Tensor | null = null;
  readonly downProjScales: Tensor | null = null;

  private readonly routing: TopKSoftmax;
  /** Expert parallelism: the group the parts are summed over and this rank's experts (null: every expert here). */
  private readonly ep: { readonly group: TensorParallelGroup; readonly start: number; readonly count: number } | null;

  constructor(
    readonly numExperts: number,
    readonly topK: number,
    readonly hiddenSize: number,
    readonly intermediateSize: number,
    readonly swigluLimit = 7,
    readonly format: GptOssExpertsFormat = 'dense',
    readonly swigluAlpha = GPT_OSS_SWIGLU_ALPHA,
  ) {
    super();
    if (topK > numExperts) throw new RangeError(`${new.target.name}: top_k ${topK} exceeds the ${numExperts} experts`);
    const group = currentTensorParallelGroup();
    this.ep = currentExpertParallel() && group.world > 1 ? { group, ...expertParallelRange(numExperts, group.rank, group.world) } : null;
    const [E, H, I] = [this.ep?.count ?? numExperts, hiddenSize, intermediateSize];
    this.routing = this.createModule('routing', 'L1/topk_softmax', topK, true);
    if (format === 'dense') {
      this.gateUpProj = this.parameter('gate_up_proj', [E, H, 2 * I]);
    } else {
      if (H % 32 || I % 32) throw new RangeError(`GptOssExperts: MXFP4 needs hidden ${H} and intermediate ${I} to be multiples of 32 (the block)`);
      this.gateUpProjBlocks = this.parameter('gate_up_proj_blocks', [E, 2 * I, H / 32, 16], 'u8');
      this.gateUpProjScales = this.parameter('gate_up_proj_scales', [E, 2 * I, H / 32], 'u8');
    }
    this.gateUpProjBias = this.parameter('gate_up_proj_bias', [E, 2 * I]);
    if (format === 'dense') {
      this.downProj = this.parameter('down_proj', [E, I, H]);
    } else {
      this.downProjBlocks = this.parameter('down_proj_blocks', [E, H, I / 32, 16], 'u8');
      this.downProjScales = this.parameter('down_proj_scales', [E, H, I / 32], 'u8');
    }
    this.downProjBias = this.parameter('down_proj_bias', [E, H]);
  }

  /** x [R, K] through expert ids [R] of weights stored as `dense` [E, K, N] (HF's x @ W layout) or MXFP4 rows [E, N, K]. */
  private gemm(s: OpScope, x: Tensor, ids: Tensor, dense: Tensor | null, blocks: Tensor | null, scales: Tensor | null, bias: Tensor): Tensor {
    if (dense) return s.op('grouped_gemm', [x, s.own(dense.transpose(1, 2)), null, ids, bias]);
    return s.op('mxfp4_grouped_gemm', [x, blocks!, scales!, null, ids, bias]);
  }

  forward(hiddenStates: Tensor, routerLogits: Tensor): Tensor {
    const [topkWeights, topkIds] = this.routing.forward(routerLogits);
    try {
      if (!this.ep) return this.expertsForward(hiddenStates, topkWeights, topkIds);
      const s = new OpScope();
      try {
        // this rank's choices: local ids, the others id -1 (a zero row) and weight 0
        const shifted = s.op('sub', [topkIds, this.ep.start]);
        const mine = s.op('logical_and', [s.op('ge', [shifted, 0]), s.op('lt', [shifted, this.ep.count])]);
        const ids = s.op('to', [s.op('where', [mine, shifted, -1])], { dtype: topkIds.dtype });
        const weights = s.op('to', [s.op('where', [mine, topkWeights, 0])], { dtype: topkWeights.dtype });
        return this.ep.group.allReduce_(this.expertsForward(hiddenStates, weights, ids)); // the combine
      } finally {
        s.dispose();
      }
    } finally {
      topkWeights.dispose();
      topkIds.dispose();
    }
  }

  private expertsForward(hiddenStates: Tensor, topkWeights: Tensor, topkIds: Tensor): Tensor {
    const [T, H] = hiddenStates.shape as [number, number];
    const K = topkIds.shape[1]!;
    const R = T * K;
    const dtype = hiddenStates.dtype;
    const s = new OpScope();
    // row r of the repeated input is token r / K, indices built on the device (a host upload fails a CUDA graph capture)
    const rowOf = s.op('div', [s.own(deviceArange(this.ctx.backend, R, this.ctx.device)), K], { rounding_mode: 'floor' });
    const x = s.op('index_select', [hiddenStates, rowOf], { dim: 0 });
    const ids = s.own(s.own(topkIds.contiguous()).view(R));
    const gu = this.gemm(s, x, ids, this.gateUpProj, this.gateUpProjBlocks, this.gateUpProjScales, this.gateUpProjBias); // [R, 2I]
    const gate = s.op('slice', [gu], { dim: 1, start: 0, end: null, step: 2 });
    const up = s.op('slice', [gu], { dim: 1, start: 1, end: null, step: 2 });
    const act = s.op('elementwise_chain', [gate, up], { steps: swigluoaiSteps(this.swigluLimit, this.swigluAlpha) });
    const down = this.gemm(s, act, ids, this.downProj, this.downProjBlocks, this.downProjScales, this.downProjBias); // [R, H]
    const w = s.op('to', [s.own(s.own(topkWeights.contiguous()).view(R, 1))], { dtype });
    const weighted = s.op('mul', [down, w]);
    const out = s.op('sum', [s.own(weighted.view(T, K, H))], { dim: 1 });
    return s.keep([out])[0]!;
  }
}

/**
 * The clamped SwiGLU of gpt-oss (vLLM's swigluoai_and_mul) over the chain inputs (gate, up) as one elementwise chain:
 * gate <= limit, -limit <= up <= limit, glu = gate sigmoid(alpha gate) (quick_gelu at alpha 1.702), out = (up + 1) glu,
 * the intermediates in float and one rounding, as vLLM's kernel (one launch on CUDA, no temporaries).
 */
export function swigluoaiSteps(limit: number, alpha: number): ChainStep[] {
  const steps: ChainStep[] = [
    { op: 'clamp', args: [{ input: 0 }, null, { value: limit }], attrs: {} }, // 0: gate
    { op: 'clamp', args: [{ input: 1 }, { value: -limit }, { value: limit }], attrs: {} }, // 1: up
  ];
  if (alpha === GPT_OSS_SWIGLU_ALPHA) steps.push({ op: 'quick_gelu', args: [{ step: 0 }], attrs: {} }); // 2: glu
  else {
    steps.push({ op: 'mul', args: [{ step: 0 }, { value: alpha }], attrs: {} }); // 2
    steps.push({ op: 'sigmoid', args: [{ step: 2 }], attrs: {} }); // 3
    steps.push({ op: 'mul', args: [{ step: 0 }, { step: 3 }], attrs: {} }); // 4: glu
  }
  const glu = steps.length - 1;
  steps.push({ op: 'add', args: [{ step: 1 }, { value: 1 }], attrs: {} });
  steps.push({ op: 'mul', args: [{ step: steps.length - 1 }, { step: glu }], attrs: {} });
  return steps;
}

/**
 * gpt-oss's MoE block (vLLM's gpt_oss MLPBlock; HF GptOssMLP; the original's GptOssMoE) at tp / ep size 1: router
 * (L1/gate_linear with bias: the checkpoint's mlp.router.weight / bias, float32 logits) and experts, which route and
 * run them: L2/mxfp4_moe for MXFP4 checkpoints, GptOssExperts for dense ones. Constructor: (hiddenSize, numExperts,
 * topK, intermediateSize, swigluLimit, expertsFormat, swigluAlpha). forward(hiddenStates [T, H]) -> [T, H].
 */
export class GptOssMoE extends Module {
  private readonly router: GateLinear;
  readonly experts: GptOssExperts;
  constructor(
    readonly hiddenSize: number,
    readonly numExperts: number,
    readonly topK: number,
    readonly intermediateSize: number,
    readonly swigluLimit = 7,
    readonly expertsFormat: GptOssExpertsFormat = 'dense',
    readonly swigluAlpha = GPT_OSS_SWIGLU_ALPHA,
  ) {
    super();
    if (topK > numExperts) throw new RangeError(`GptOssMoE: top_k ${topK} exceeds the ${numExperts} experts`);
    this.router = this.createModule('router', 'L1/gate_linear', hiddenSize, numExperts, true);
    this.experts =
      expertsFormat === 'mxfp4'
        ? this.createModule('experts', 'L2/mxfp4_moe', numExperts, topK, hiddenSize, intermediateSize, swigluLimit, swigluAlpha)
        : this.registerModule('experts', new GptOssExperts(numExperts, topK, hiddenSize, intermediateSize, swigluLimit, 'dense', swigluAlpha));
  }

  forward(hiddenStates: Tensor): Tensor {
    const logits = this.router.forward(hiddenStates);
    try {
      return this.experts.forward(hiddenStates, logits);
    } finally {
      logits.dispose();
    }
  }
}

/**
 * Random parameters for gpt-oss's MoE: the router sharp (std 8 / sqrt(H): logit gaps well above bf16 noise, so a bf16
 * run routes as the float64 reference does) with bias N(0, 0.25); dense expert weights N(0, 1 / fan_in), biases N(0,
 * 0.01); MXFP4 blocks uniform bytes with scales 2^-4..2^-2 around 1 / sqrt(fan_in). Other parameters (attention,
 * norms) are left to the caller.
 */
export function initGptOssMoeParameters(m: Module, rng: Rng): void {
  for (const [name, p] of m.namedParameters()) {
    let v: Float64Array | number[];
    if (name.endsWith('router.weight')) v = rng.fillNormal(p.numel, 8 / Math.sqrt(p.shape[1]!));
    else if (name.endsWith('router.bias')) v = rng.fillNormal(p.numel, 0.5);
    else if (name.endsWith('experts.gate_up_proj') || name.endsWith('experts.down_proj')) v = rng.fillNormal(p.numel, 1 / Math.sqrt(p.shape[1]!));
    else if (name.endsWith('_proj_bias')) v = rng.fillNormal(p.numel, 0.1);
    else if (name.endsWith('_blocks')) v = Array.from({ length: p.numel }, () => rng.int(0, 256));
    else if (name.endsWith('_scales')) {
      const fanIn = p.shape[p.shape.length - 1]! * 32;
      const center = 127 - Math.round(Math.log2(Math.sqrt(fanIn)) + 1.5); // fp4 magnitudes average ~2.5
      v = Array.from({ length: p.numel }, () => center + rng.int(-1, 2));
    } else continue;
    const t = Tensor.fromArray(p.backend, v, p.shape, p.dtype, { device: p.device });
    p.copy_(t);
    t.dispose();
  }
}

function moeCase(name: string, dtype: 'f32' | 'bf16', T: number, H: number, I: number, E: number, K: number, limit: number, format: GptOssExpertsFormat, alpha?: number) {
  return { name, dtype, dims: { T, H, I, E, K }, init: alpha === undefined ? [H, E, K, I, limit, format] : [H, E, K, I, limit, format, alpha] };
}
const prod = (c: GptOssConfig, label: string, T: number) => moeCase(`${label}-mxfp4-T${T}`, 'bf16', T, c.hiddenSize, c.intermediateSize, c.numLocalExperts, c.numExpertsPerTok, c.swigluLimit, 'mxfp4');

/** Bytes and FLOPs: the router, the experts a step can hit (MXFP4: half a byte per weight plus a scale per 32), the SwiGLU. */
export function gptOssMoeWork(c: Pick<TaskCase, 'dims' | 'dtype' | 'init'>): { bytes: number; flops: number } {
  // E, K, I from the init args (a captured case's dims hold only what its inputs show: T, H)
  const [H, E, K, I] = c.init as [number, number, number, number];
  const T = c.dims.T!;
  const it = DTYPE_INFO[c.dtype].itemsize;
  const hit = Math.min(E, T * K);
  const perExpert = c.init[5] === 'mxfp4' ? (3 * I * H) / 2 + (3 * I * H) / 32 : bytesOf([3 * I, H], it);
  return {
    bytes: hit * (perExpert + bytesOf([2 * I + H], it)) + bytesOf([E, H + 1], it) + 2 * bytesOf([T, H], it) + bytesOf([T * K, 3 * I + H], it),
    flops: 2 * T * H * E + 6 * T * K * H * I + 8 * T * K * I + 2 * T * K * H,
  };
}

export const gptOssMoeTask = defineTask(
  {
    id: 'L2/gpt_oss_moe',
    level: 2,
    className: 'GptOssMoE',
    family: [FAMILY],
    architectures: ['gpt_oss'],
    mirrors: 'vllm.model_executor.models.gpt_oss.MLPBlock',
    description:
      "gpt-oss's MoE block: router linear with bias, top-k then softmax over the k, experts with biases (gate / up interleaved, clamped SwiGLU with alpha 1.702, down), weighted sum; experts dense (bf16) or MXFP4 (blocks / scales through mxfp4_grouped_gemm).",
    init: [
      { name: 'hiddenSize', type: 'int' },
      { name: 'numExperts', type: 'int' },
      { name: 'topK', type: 'int' },
      { name: 'intermediateSize', type: 'int' },
      { name: 'swigluLimit', type: 'float', optional: true, default: 7 },
      { name: 'expertsFormat', type: 'string', optional: true, default: 'dense', doc: "'dense' (gate_up_proj / down_proj) or 'mxfp4' (*_blocks / *_scales)" },
      { name: 'swigluAlpha', type: 'float', optional: true, default: 1.702, doc: "the SwiGLU's sigmoid gain (transformers 5's swiglu_alpha)" },
    ],
    inputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'H'] }],
    tolerance: { bf16: { atol: 3e-2, rtol: 3e-2 } },
    imports: ['L1/gate_linear', 'L1/topk_softmax', 'L2/mxfp4_moe'],
    cases: {
      ci: [
        moeCase('dense-top2-of-8-f32', 'f32', 9, 32, 16, 8, 2, 7, 'dense'),
        moeCase('dense-clamped-limit0.6-f32', 'f32', 7, 32, 24, 4, 2, 0.6, 'dense'),
        moeCase('dense-alpha1-f32', 'f32', 5, 32, 16, 8, 2, 7, 'dense', 1),
        moeCase('dense-top4-of-8-bf16', 'bf16', 6, 32, 16, 8, 4, 7, 'dense'),
        moeCase('mxfp4-top2-of-8-f32', 'f32', 7, 64, 32, 8, 2, 7, 'mxfp4'),
        moeCase('mxfp4-clamped-decode-f32', 'f32', 1, 64, 32, 4, 2, 0.6, 'mxfp4'),
        moeCase('mxfp4-top4-of-8-bf16', 'bf16', 5, 64, 32, 8, 4, 7, 'mxfp4'),
      ],
      production: [...MOE_TOKENS.map((T) => prod(GPT_OSS_20B_CONFIG, 'gpt-oss-20b', T)), prod(GPT_OSS_120B_CONFIG, 'gpt-oss-120b', 32)],
    },
  },
  {
    baseline: GptOssMoE,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype)],
    initParameters: (m, _c, rng) => initGptOssMoeParameters(m, rng),
    reference: ([x], params, c) => [hostArray(x!.shape, gptOssMoeBlock(x!.data, x!.shape[0]!, params, '', c.init[2] as number, (c.init[4] as number | undefined) ?? 7, (c.init[6] as number | undefined) ?? GPT_OSS_SWIGLU_ALPHA))],
    work: (c) => gptOssMoeWork(c),
  },
);
