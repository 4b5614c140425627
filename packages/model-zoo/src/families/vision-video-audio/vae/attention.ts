import { Module, OpScope, type Tensor } from '@fastkernels/core';
import { createLayer } from '../../../layers/registry.js';
import type { GroupNorm } from '../../../layers/norm.js';
import type { DenseAttention } from '../../../tasks/L1/attention/dense_attention.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';

/**
 * diffusers' Attention as the AutoencoderKL mid block builds it (heads = 1, dim_head = channels, norm_num_groups set,
 * residual_connection, rescale_output_factor 1, biases): GroupNorm over [N, C, H*W], the H*W positions attend to each
 * other with one head of C channels (to_q / to_k / to_v / to_out.0), the input added back.
 * forward(hiddenStates [N, C, H, W]) -> [N, C, H, W].
 */
export class Attention extends Module {
  readonly groupNorm: GroupNorm;
  readonly toQ: Linear;
  readonly toK: Linear;
  readonly toV: Linear;
  readonly toOut: Linear;
  readonly attn: DenseAttention;
  constructor(
    readonly channels: number,
    readonly normNumGroups: number,
    readonly eps = 1e-6,
  ) {
    super();
    this.groupNorm = this.registerModule('group_norm', createLayer('GroupNorm', normNumGroups, channels, eps, true));
    this.toQ = this.createModule('to_q', 'L1/linear', channels, channels, true);
    this.toK = this.createModule('to_k', 'L1/linear', channels, channels, true);
    this.toV = this.createModule('to_v', 'L1/linear', channels, channels, true);
    this.toOut = this.createModule('to_out.0', 'L1/linear', channels, channels, true);
    this.attn = this.createModule('attn', 'L1/dense_attention');
  }

  forward(hiddenStates: Tensor): Tensor {
    const s = new OpScope();
    try {
      const [N, C, H, W] = hiddenStates.shape as [number, number, number, number];
      const S = H * W;
      const flat = s.own(hiddenStates.view(N, C, S));
      // diffusers: group_norm(x.transpose(1, 2)).transpose(1, 2), i.e. the norm on [N, C, S], then tokens [N, S, C]
      const tokens = s.op('contiguous', [s.own(s.own(this.groupNorm.forward(flat)).transpose(1, 2))]);
      const head = (t: Tensor) => s.own(t.view(N, 1, S, C));
      const q = head(s.own(this.toQ.forward(tokens)));
      const k = head(s.own(this.toK.forward(tokens)));
      const v = head(s.own(this.toV.forward(tokens)));
      const ctx = s.own(s.own(this.attn.forward(q, k, v)).view(N, S, C));
      const out = s.own(this.toOut.forward(ctx));
      const back = s.op('contiguous', [s.own(out.transpose(1, 2))]);
      return s.keep([s.op('add', [s.own(back.view(N, C, H, W)), hiddenStates])])[0]!;
    } catch (e) {
      s.dispose();
      throw e;
    }
  }
}
