/**
 * FluxPipeline's latent layout: the VAE's [B, C, h, w] latents packed into [B, (h/2)(w/2), 4C] tokens of 2x2 patches
 * (_pack_latents / _unpack_latents), the image tokens' RoPE ids [(h/2)(w/2), 3] = (0, row, col)
 * (_prepare_latent_image_ids), and the latent size of an image size (multiples of vae_scale_factor * 2).
 */
import { OpScope, Tensor, UserError, hostArray, type ExecutionContext, type HostArray } from '@fastkernels/core';

/** FluxPipeline.prepare_latents: the latent height / width of an image (2 * (size // (vae_scale_factor * 2))). */
export function latentSize(pixels: number, vaeScaleFactor: number, what = '--size'): number {
  const unit = vaeScaleFactor * 2;
  if (!Number.isInteger(pixels) || pixels < unit) throw new UserError(`image size ${pixels} is below ${unit} (vae_scale_factor ${vaeScaleFactor} x 2)`, { field: what });
  if (pixels % unit !== 0) throw new UserError(`image size ${pixels} is not a multiple of ${unit} (the VAE's ${vaeScaleFactor}x times the 2x2 packing)`, { field: what, fix: `use ${Math.round(pixels / unit) * unit}` });
  return 2 * Math.floor(pixels / unit);
}

/** _pack_latents: [B, C, h, w] -> view [B, C, h/2, 2, w/2, 2] -> permute (0, 2, 4, 1, 3, 5) -> [B, (h/2)(w/2), 4C]. */
export function packLatents(latents: Tensor): Tensor {
  const [B, C, h, w] = latents.shape as [number, number, number, number];
  const s = new OpScope();
  const p = s.own(s.own(latents.view(B, C, h / 2, 2, w / 2, 2)).permute(0, 2, 4, 1, 3, 5));
  return s.keep([s.op('contiguous', [p]).view(B, (h / 2) * (w / 2), C * 4)])[0]!;
}

/** _unpack_latents: [B, (h/2)(w/2), 4C] -> view [B, h/2, w/2, C, 2, 2] -> permute (0, 3, 1, 4, 2, 5) -> [B, C, h, w]. */
export function unpackLatents(latents: Tensor, h: number, w: number): Tensor {
  const [B, , D] = latents.shape as [number, number, number];
  const C = D / 4;
  const s = new OpScope();
  const p = s.own(s.own(latents.view(B, h / 2, w / 2, C, 2, 2)).permute(0, 3, 1, 4, 2, 5));
  return s.keep([s.op('contiguous', [p]).view(B, C, h, w)])[0]!;
}

/** _prepare_latent_image_ids for latents h x w: [(h/2)(w/2), 3] rows (0, row, col), in the model dtype as diffusers casts them. */
export function latentImageIds(ctx: Pick<ExecutionContext, 'backend' | 'device'>, h: number, w: number, dtype: Tensor['dtype']): Tensor {
  const v: number[] = [];
  for (let r = 0; r < h / 2; r++) for (let c = 0; c < w / 2; c++) v.push(0, r, c);
  return Tensor.fromArray(ctx.backend, v, [(h / 2) * (w / 2), 3], dtype, { device: ctx.device });
}

/** Host form of _pack_latents (float64 references): token (i, j) holds channel-major 2x2 patches c * 4 + di * 2 + dj. */
export function packLatentsHost(x: HostArray): HostArray {
  const [B, C, h, w] = x.shape as [number, number, number, number];
  const out = hostArray([B, (h / 2) * (w / 2), 4 * C]);
  for (let b = 0; b < B; b++)
    for (let c = 0; c < C; c++)
      for (let y = 0; y < h; y++)
        for (let xx = 0; xx < w; xx++) {
          const tok = (y >> 1) * (w / 2) + (xx >> 1);
          out.data[(b * (h / 2) * (w / 2) + tok) * 4 * C + c * 4 + (y & 1) * 2 + (xx & 1)] = x.data[((b * C + c) * h + y) * w + xx]!;
        }
  return out;
}

/** Host form of _unpack_latents (the inverse of packLatentsHost). */
export function unpackLatentsHost(x: HostArray, h: number, w: number): HostArray {
  const [B, , D] = x.shape as [number, number, number];
  const C = D / 4;
  const out = hostArray([B, C, h, w]);
  for (let b = 0; b < B; b++)
    for (let c = 0; c < C; c++)
      for (let y = 0; y < h; y++)
        for (let xx = 0; xx < w; xx++) out.data[((b * C + c) * h + y) * w + xx] = x.data[(b * (h / 2) * (w / 2) + (y >> 1) * (w / 2) + (xx >> 1)) * D + c * 4 + (y & 1) * 2 + (xx & 1)]!;
  return out;
}
