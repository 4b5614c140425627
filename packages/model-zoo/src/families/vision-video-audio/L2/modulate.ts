/** diffusers' adaptive-norm arithmetic shared by the AdaLayerNorm modules and the FLUX blocks. */
import { F, OpScope, type Tensor } from '@fastkernels/core';

/** x * (1 + scale[:, None]) + shift[:, None]: x [B, S, D], scale / shift [B, D] (views of a chunked emb are fine). */
export function modulate(x: Tensor, scale: Tensor, shift: Tensor): Tensor {
  const s = new OpScope();
  const sc = s.own(scale.unsqueeze(1));
  const sh = s.own(shift.unsqueeze(1));
  const y = s.op('mul', [x, s.op('add', [sc, 1])]);
  return s.keep([F.add(y, sh)])[0];
}

/** residual + gate[:, None] * y. */
export function gatedResidual(residual: Tensor, gate: Tensor, y: Tensor): Tensor {
  const s = new OpScope();
  const g = s.own(gate.unsqueeze(1));
  return s.keep([F.add(residual, s.op('mul', [g, y]))])[0];
}
