/**
 * diffusers' adaptive-norm arithmetic shared by the AdaLayerNorm modules and the FLUX blocks. Each is one kernel on
 * CUDA: modulate and gatedResidual are elementwise chains (one rounding, where torch rounds each op), normModulate
 * the layer_norm_modulate op (the norm and the modulation in one read of x) where the LayerNorm is ours.
 */
import { F, OpScope, type Tensor } from '@fastkernels/core';
import { runsOwnForward } from '../../../common/fusion.js';
import { LayerNorm } from '../../../layers/norm.js';

/** x * (1 + scale[:, None]) + shift[:, None]: x [B, S, D], scale / shift [B, D] (views of a chunked emb are fine). */
export function modulate(x: Tensor, scale: Tensor, shift: Tensor): Tensor {
  const s = new OpScope();
  try {
    const sc = s.own(scale.unsqueeze(1));
    const sh = s.own(shift.unsqueeze(1));
    return F.elementwiseChain([x, sc, sh], {
      steps: [
        { op: 'add', args: [{ input: 1 }, { value: 1 }] },
        { op: 'mul', args: [{ input: 0 }, { step: 0 }] },
        { op: 'add', args: [{ step: 1 }, { input: 2 }] },
      ],
    });
  } finally {
    s.dispose();
  }
}

/** residual + gate[:, None] * y. */
export function gatedResidual(residual: Tensor, gate: Tensor, y: Tensor): Tensor {
  const g = gate.unsqueeze(1);
  try {
    return F.elementwiseChain([residual, g, y], {
      steps: [
        { op: 'mul', args: [{ input: 1 }, { input: 2 }] },
        { op: 'add', args: [{ input: 0 }, { step: 0 }] },
      ],
    });
  } finally {
    g.dispose();
  }
}

/**
 * norm(x) * (1 + scale[:, None]) + shift[:, None] as one layer_norm_modulate when `norm` is our own affine-free
 * LayerNorm over the last dim (runsOwnForward: a candidate for L1/layer_norm, or a capture's wrapped module, must see
 * its call); else norm's forward, then modulate.
 */
export function normModulate(norm: LayerNorm, x: Tensor, scale: Tensor, shift: Tensor): Tensor {
  if (runsOwnForward(norm, LayerNorm) && norm.weight === null && norm.bias === null && norm.normalizedShape.length === 1) {
    const s = new OpScope();
    try {
      return F.layerNormModulate(x, s.own(scale.unsqueeze(1)), s.own(shift.unsqueeze(1)), norm.eps);
    } finally {
      s.dispose();
    }
  }
  const h = norm.forward(x);
  try {
    return modulate(h, scale, shift);
  } finally {
    h.dispose();
  }
}
