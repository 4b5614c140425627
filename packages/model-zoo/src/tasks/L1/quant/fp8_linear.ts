import { DTYPE_INFO, F, Module, Tensor, defineTask, hostArray, type HostArray, type TaskCase } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { DENSE_MOE_LLM } from '../../families.js';
import { groupDequantReference, groupQuantFp8Reference } from './fp8-reference.js';

/** [block_n, block_k] of a block-fp8 checkpoint's weight scales (DeepSeek-V3, Qwen3-FP8: 128 x 128). */
export type WeightBlockSize = readonly [number, number];

/**
 * vLLM's block-scaled fp8 linear (Fp8LinearMethod with weight_block_size, W8A8BlockFp8LinearOp -> DeepGEMM's
 * fp8_gemm_nt): weight fp8e4m3 [N, K] with float32 weight_scale_inv [N / block_n, K / block_k] (the checkpoint's names);
 * x [..., K] is quantised per token per group of block_k (per_token_group_quant_fp8), the GEMM multiplies the two
 * dequantised operands with float32 accumulation, and the output comes back in x's dtype (bf16), bias added after.
 * The baseline is a decomposition on registry ops: quantise x, dequantise both operands to float32 (fp8_dequant with
 * group-broadcast scales), linear in float32, cast. N and K must be multiples of the block.
 */
export class Fp8Linear extends Module {
  readonly weight: Tensor;
  readonly weightScaleInv: Tensor;
  readonly bias: Tensor | null;

  constructor(
    readonly inputSize: number,
    readonly outputSize: number,
    bias = false,
    readonly weightBlockSize: WeightBlockSize = [128, 128],
  ) {
    super();
    const [bn, bk] = weightBlockSize;
    if (outputSize % bn !== 0 || inputSize % bk !== 0) throw new RangeError(`Fp8Linear: [${outputSize}, ${inputSize}] is not a whole number of [${bn}, ${bk}] blocks`);
    this.weight = this.parameter('weight', [outputSize, inputSize], 'fp8e4m3');
    this.weightScaleInv = this.parameter('weight_scale_inv', [outputSize / bn, inputSize / bk], 'f32');
    this.bias = bias ? this.parameter('bias', [outputSize]) : null;
  }

  forward(x: Tensor): Tensor {
    const [bn, bk] = this.weightBlockSize;
    const [N, K] = [this.outputSize, this.inputSize];
    const lead = x.shape.slice(0, -1);
    const T = x.numel / K;
    const x2 = x.reshape(T, K);
    const [xq, xs] = F.perTokenGroupQuantFp8(x2, bk);
    const views = [x2, xq.view(T, K / bk, bk), xs.view(T, K / bk, 1), this.weight.view(N / bn, bn, K / bk, bk), this.weightScaleInv.view(N / bn, 1, K / bk, 1)];
    const xd = F.fp8Dequant(views[1]!, views[2]!, { output_dtype: 'f32' });
    const wd = F.fp8Dequant(views[3]!, views[4]!, { output_dtype: 'f32' });
    const [xdm, wdm] = [xd.view(T, K), wd.view(N, K)];
    const out32 = F.linear(xdm, wdm);
    const out = F.to(out32, x.dtype);
    for (const t of [...views, xq, xs, xd, wd, xdm, wdm, out32]) t.dispose();
    const biased = this.bias ? F.add(out, this.bias) : out;
    if (biased !== out) out.dispose();
    const shaped = biased.reshape(...lead, N);
    biased.dispose();
    return shaped;
  }
}

/** Float64 block-fp8 linear: x group-quantised as the kernel does, weight dequantised by its blocks, x W^T + bias. */
export function fp8LinearReference(x: HostArray, weight: HostArray, scaleInv: HostArray, bias: HostArray | null, block: WeightBlockSize): HostArray {
  const [N, K] = weight.shape as [number, number];
  const [bn, bk] = block;
  const T = x.data.length / K;
  const [xq, xs] = groupQuantFp8Reference(x, bk);
  const xd = groupDequantReference(xq, xs, bk);
  const out = hostArray([...x.shape.slice(0, -1), N]);
  for (let n = 0; n < N; n++) {
    for (let t = 0; t < T; t++) {
      let acc = 0;
      for (let k = 0; k < K; k++) acc += xd[t * K + k]! * weight.data[n * K + k]! * scaleInv.data[Math.floor(n / bn) * (K / bk) + Math.floor(k / bk)]!;
      out.data[t * N + n] = acc + (bias ? bias.data[n]! : 0);
    }
  }
  return out;
}

const blockOf = (c: TaskCase): WeightBlockSize => (c.init[3] as WeightBlockSize | undefined) ?? [128, 128];

const linearCase = (name: string, dtype: 'f32' | 'bf16', T: number, K: number, N: number, init: unknown[] = [K, N]) => ({ name, dtype, dims: { T, K, N }, init });

/** Block-fp8 checkpoints' projections: Qwen3-30B-A3B-FP8 (hidden 2048, 32 q / 4 kv heads of 128) and Llama-3-8B's widths. */
const QWEN3_QKV: [number, number] = [2048, (32 + 2 * 4) * 128];
const QWEN3_O: [number, number] = [32 * 128, 2048];
const LLAMA3_GATE_UP: [number, number] = [4096, 2 * 14336];
const LLAMA3_DOWN: [number, number] = [14336, 4096];

export const fp8LinearTask = defineTask(
  {
    id: 'L1/fp8_linear',
    level: 1,
    className: 'Fp8Linear',
    family: [DENSE_MOE_LLM],
    architectures: ['deepseek', 'glm', 'gpt_oss', 'kimi_linear', 'llama', 'mixtral', 'qwen3_next', 'qwen3_vl'],
    mirrors: 'vllm.model_executor.layers.quantization.fp8.Fp8LinearMethod',
    description:
      'Block-scaled fp8 GEMM (DeepGEMM fp8_gemm_nt): x quantised per token per 128-group, fp8 weight with 128 x 128 float32 block scales (weight_scale_inv), float32 accumulation, bf16 out.',
    init: [
      { name: 'inputSize', type: 'int' },
      { name: 'outputSize', type: 'int' },
      { name: 'bias', type: 'bool', optional: true, default: false },
      { name: 'weightBlockSize', type: 'object', optional: true, default: [128, 128], doc: '[block_n, block_k]; x is grouped by block_k' },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'K'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'N'] }],
    cases: {
      ci: [
        linearCase('block128-bf16', 'bf16', 5, 256, 384),
        linearCase('block64-bias-f32', 'f32', 3, 128, 192, [128, 192, true, [64, 64]]),
        linearCase('decode-block128-f32', 'f32', 1, 384, 128),
      ],
      production: [
        linearCase('qwen3-30b-a3b-qkv-T4096', 'bf16', 4096, ...QWEN3_QKV),
        linearCase('qwen3-30b-a3b-o-proj-decode-T64', 'bf16', 64, ...QWEN3_O),
        linearCase('llama3-8b-gate-up-T4096', 'bf16', 4096, ...LLAMA3_GATE_UP),
        linearCase('llama3-8b-down-T4096', 'bf16', 4096, ...LLAMA3_DOWN),
        linearCase('llama3-8b-gate-up-decode-T64', 'bf16', 64, ...LLAMA3_GATE_UP),
      ],
    },
  },
  {
    baseline: Fp8Linear,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.K!], c.dtype)],
    initParameters: (m, c, rng) => {
      const { K } = c.dims as Record<string, number>;
      for (const [name, p] of m.namedParameters()) {
        // fp8 values of std 16 (well inside e4m3's range), block scales around 1 / (16 sqrt(K)) so outputs are O(1)
        const v =
          name === 'weight' ? rng.fillNormal(p.numel, 16)
          : name === 'weight_scale_inv' ? Array.from({ length: p.numel }, () => (0.5 + 1.5 * rng.uniform()) / (16 * Math.sqrt(K!)))
          : rng.fillNormal(p.numel, 0.1);
        const t = Tensor.fromArray(p.backend, v, p.shape, p.dtype, { device: p.device });
        p.copy_(t);
        t.dispose();
      }
    },
    reference: ([x], params, c) => [fp8LinearReference(x!, params.get('weight')!, params.get('weight_scale_inv')!, params.get('bias') ?? null, blockOf(c))],
    work: (c) => {
      const { T, K, N } = c.dims as Record<string, number>;
      const [bn, bk] = blockOf(c);
      const it = DTYPE_INFO[c.dtype].itemsize;
      return {
        // x in, fp8 weight and its block scales, out; x's quantised copy stays on chip in a fused kernel
        bytes: bytesOf([T!, K!], it) + bytesOf([N!, K!], 1) + bytesOf([N! / bn, K! / bk], 4) + bytesOf([T!, N!], it),
        flops: 2 * T! * N! * K!,
      };
    },
  },
);
