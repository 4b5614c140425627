/**
 * BatchNorm statistics for a randomly initialised conv net: one forward over seeded noise images in which every
 * BatchNorm first sets its running_mean / running_var to the batch statistics of its input (torch's train-mode forward
 * with momentum 1), then normalises with them. Why: per-fan-in weights (weights/init-scale.ts) alone do not keep a
 * deep Conv-BN-SiLU chain at unit scale (SiLU's second-moment map has no stable fixed point: below a gain of about
 * 1.65 yolov10n's activations die out and every score is sigmoid(bias), above it they blow up and saturate), and a BN
 * in eval mode at mean 0 / var 1 is the identity. With the batch statistics each BN output is unit-scale per channel,
 * so a random model's scores and boxes depend on its input. Only for random weights: a checkpoint keeps its own.
 */
import { F, Rng, Tensor, withContext, type ExecutionContext, type Module } from '@fastkernels/core';

/** A module holding running statistics (BatchNorm2d or a candidate replacing it). */
interface BatchNormLike extends Module {
  forward(x: Tensor): Tensor;
}

const hasRunningStats = (m: Module): boolean => {
  const names = m.namedParameters().map(([k]) => k);
  return names.includes('running_mean') && names.includes('running_var');
};

/** Side of the calibration images: the model's size, capped (the statistics of a random net barely depend on it). */
export const CALIBRATION_SIZE = 128;
/** Pixels in the calibration batch (16 images of 128 x 128): at stride 32 that is 256 samples per channel. */
export const CALIBRATION_PIXELS = 16 * 128 * 128;

/**
 * Run `forward` once over `batch` seeded uniform-noise images [batch, 3, S, S] (S = min(imageSize, CALIBRATION_SIZE))
 * with every BatchNorm's running statistics set from its input on the way (biased variance over N, H, W: what the
 * train-mode forward normalises by). Returns the number of BatchNorms set.
 */
export function calibrateBatchNorm(model: Module & { readonly imageSize: number; forward(x: Tensor): Tensor }, ctx: ExecutionContext, seed: number, batch?: number): number {
  const bns = model.namedModules().map(([, m]) => m).filter((m) => m !== model && hasRunningStats(m)) as BatchNormLike[];
  const S = Math.min(model.imageSize, CALIBRATION_SIZE);
  batch ??= Math.max(2, Math.ceil(CALIBRATION_PIXELS / (S * S)));
  for (const bn of bns) {
    const forward = bn.forward.bind(bn);
    const params = new Map(bn.namedParameters());
    bn.forward = (x: Tensor) => {
      const wide = x.dtype === 'f64' ? x : x.to('f32');
      const mean = F.mean(wide, { dim: [0, 2, 3] });
      const variance = F.var(wide, { dim: [0, 2, 3], correction: 0 });
      params.get('running_mean')!.copy_(mean);
      params.get('running_var')!.copy_(variance);
      for (const t of [mean, variance]) t.dispose();
      if (wide !== x) wide.dispose();
      return forward(x);
    };
  }
  try {
    withContext(ctx, () => {
      const v = new Rng(seed ^ 0x42a11b).fillUniform(batch * 3 * S * S, 0, 1);
      const images = Tensor.fromArray(ctx.backend, v, [batch, 3, S, S], ctx.dtype, { device: ctx.device });
      model.forward(images).dispose();
      images.dispose();
    });
  } finally {
    // the patches are own properties shadowing the class's forward
    for (const bn of bns) delete (bn as Partial<BatchNormLike>).forward;
  }
  return bns.length;
}
