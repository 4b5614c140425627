import { DTYPE_INFO, Module, currentTensorParallelGroup, defineTask, divide, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import { LLAMA3_8B } from '../config.js';
import { FAMILY } from '../family.js';
import { runsOwnForward } from '../../../common/fusion.js';
import { Linear } from '../../../tasks/L1/linear/linear.js';
import type { RMSNorm } from '../../../tasks/L1/norm/rms_norm.js';
import { SiluAndMul } from '../../../tasks/L1/activation/silu_and_mul.js';
import { normedProject, project, type Projection } from '../projection.js';
import { denseMlp } from '../reference.js';
import { initProjections } from './attention.js';

/**
 * vLLM's LlamaMLP: gate_up_proj (MergedColumnParallelLinear [I, I], i.e. L1/linear with N = 2I, rows
 * gate | up), SiluAndMul, down_proj (RowParallelLinear at tp_size 1). Only hidden_act 'silu' exists in vLLM's.
 * With a tensor-parallel group of world W > 1: gate_up_proj is L2/merged_column_parallel_linear (this rank's
 * [gate_r | up_r], I / W rows each, so SiluAndMul works on the rank's slice as is) and down_proj is
 * L2/row_parallel_linear (input columns split, partial products all-reduced).
 */
export class LlamaMLP extends Module {
  private readonly gateUpProj: Projection;
  private readonly downProj: Projection;
  private readonly actFn: SiluAndMul;
  constructor(
    readonly hiddenSize: number,
    readonly intermediateSize: number,
    readonly hiddenAct = 'silu',
    readonly bias = false,
  ) {
    super();
    if (hiddenAct !== 'silu') throw new RangeError(`LlamaMLP: unsupported activation '${hiddenAct}': only silu is supported`);
    const world = currentTensorParallelGroup().world;
    if (world === 1) {
      this.gateUpProj = this.createModule('gate_up_proj', 'L1/linear', hiddenSize, 2 * intermediateSize, bias);
      this.downProj = this.createModule('down_proj', 'L1/linear', intermediateSize, hiddenSize, bias);
    } else {
      divide(intermediateSize, world, 'the MLP intermediate size');
      this.gateUpProj = this.createModule('gate_up_proj', 'L2/merged_column_parallel_linear', hiddenSize, [intermediateSize, intermediateSize], bias);
      this.downProj = this.createModule('down_proj', 'L2/row_parallel_linear', intermediateSize, hiddenSize, bias);
    }
    this.actFn = this.createModule('act_fn', 'L1/silu_and_mul');
  }

  forward(x: Tensor): Tensor {
    const a = this.fusedGateUpAct(x) ?? this.gateUpAct(x);
    const y = project(this.downProj, a);
    a.dispose();
    return y;
  }

  /**
   * The decoder layer's post_attention_layernorm (`norm`, adding `residual` first) and this MLP with the norm, gate_up
   * and silu in one backend op (normedProject with act 'silu': at bs-1 decode on CUDA, one GEMV launch for the three),
   * then down_proj. Only when act_fn runs its own forward too; null when not or where normedProject is (nothing was
   * computed: the caller runs the norm and forward). Returns [output, the new residual].
   */
  forwardNormed(x: Tensor, residual: Tensor, norm: RMSNorm): [Tensor, Tensor] | null {
    if (!runsOwnForward(this.actFn, SiluAndMul)) return null;
    const fused = normedProject(this.ctx.backend.ops, norm, this.gateUpProj, x, residual, 'silu');
    if (!fused) return null;
    const [a, res] = fused;
    try {
      return [project(this.downProj, a), res!];
    } catch (e) {
      res?.dispose();
      throw e;
    } finally {
      a.dispose();
    }
  }

  /** silu(gate) * up as the two modules compute it. */
  private gateUpAct(x: Tensor): Tensor {
    const gateUp = project(this.gateUpProj, x);
    const a = this.actFn.forward(gateUp);
    gateUp.dispose();
    return a;
  }

  /**
   * The same in one backend call (ops.linearSiluAndMul: one launch at bs-1 decode instead of two) when both modules
   * are our own L1/linear and L1/silu_and_mul (runsOwnForward) and the backend takes the shapes; null otherwise.
   */
  private fusedGateUpAct(x: Tensor): Tensor | null {
    const ops = this.ctx.backend.ops;
    if (!ops.linearSiluAndMul || !(this.gateUpProj instanceof Linear)) return null;
    if (!runsOwnForward(this.gateUpProj, Linear) || !runsOwnForward(this.actFn, SiluAndMul)) return null;
    return ops.linearSiluAndMul(x, this.gateUpProj.weight, this.gateUpProj.bias);
  }
}

const L8 = LLAMA3_8B;
const prod = (T: number) => ({ name: `llama3-8b-T${T}`, dtype: 'bf16' as const, dims: { T, H: L8.hiddenSize, I: L8.intermediateSize }, init: [L8.hiddenSize, L8.intermediateSize] });

export const llamaMlpTask = defineTask(
  {
    id: 'L2/llama_mlp',
    level: 2,
    className: 'LlamaMLP',
    family: [FAMILY],
    architectures: ['llama', 'qwen2', 'mistral'],
    mirrors: 'vllm.model_executor.models.llama.LlamaMLP',
    description: 'SwiGLU MLP: merged gate_up projection, silu(gate) * up, down projection.',
    init: [
      { name: 'hiddenSize', type: 'int' },
      { name: 'intermediateSize', type: 'int' },
      { name: 'hiddenAct', type: 'string', optional: true, default: 'silu' },
      { name: 'bias', type: 'bool', optional: true, default: false, doc: 'mlp_bias (llama)' },
    ],
    inputs: [{ name: 'x', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [{ name: 'y', dtype: 'act', shape: ['T', 'H'] }],
    imports: ['L1/linear', 'L1/silu_and_mul'],
    cases: {
      ci: [
        { name: 'small-f32', dtype: 'f32', dims: { T: 9, H: 64, I: 128 }, init: [64, 128] },
        { name: 'small-bias-bf16', dtype: 'bf16', dims: { T: 5, H: 64, I: 96 }, init: [64, 96, 'silu', true] },
        { name: 'single-token-f32', dtype: 'f32', dims: { T: 1, H: 32, I: 80 }, init: [32, 80] },
      ],
      production: [prod(1), prod(32), prod(4096)],
    },
  },
  {
    baseline: LlamaMLP,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype)],
    initParameters: (m, _c, rng) => initProjections(m, rng),
    reference: ([x], params) => [hostArray(x!.shape, denseMlp(x!.data, x!.shape[0]!, params, ''))],
    work: (c) => {
      const { T, H, I } = c.dims as { T: number; H: number; I: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      return {
        bytes: bytesOf([3 * I, H], it) + 2 * bytesOf([T, H], it) + 3 * bytesOf([T, I], it) + bytesOf([T, 2 * I], it),
        flops: 6 * T * H * I + 6 * T * I,
      };
    },
  },
);
