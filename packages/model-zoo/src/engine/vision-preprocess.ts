/**
 * Images to model inputs, as production prepares them (pure pixel math on decoded RGB; decoding lives in the CLI):
 *
 * - ultralytics' LetterBox(new_shape=(S, S), auto=False, scale_fill=False, scaleup=True, center=True): scale by
 *   r = min(S / h, S / w), resize to (round(w r), round(h r)) with cv2.INTER_LINEAR, pad to S x S with `fill` gray split
 *   round(d - 0.1) / round(d + 0.1) around the centre (Python's round: half to even); pixels / 255. scaleBoxes is
 *   ultralytics' ops.scale_boxes, mapping boxes back to the original image and clipping them to it.
 * - HF ConvNextImageProcessor: with crop_pct, the shortest edge to int(S / crop_pct) (aspect kept) and the centre
 *   S x S cut; without, straight to S x S; PIL bicubic (or bilinear) resampling, / 255, (x - mean) / std.
 *
 * The resizes are float re-implementations: cv2's 11-bit fixed-point bilinear and PIL's integer bicubic round
 * differently, so pixels may differ from theirs by one gray level.
 */
import type { ImagePreprocess } from './vision-model.js';

/** A decoded image: RGB, 8 bits a channel, rows top to bottom, interleaved (r g b r g b ...). */
export interface RgbImage {
  readonly width: number;
  readonly height: number;
  readonly data: Uint8Array;
}

/** Where a letterboxed image sits in the S x S input: scale and the left / top padding (ultralytics' ratio_pad). */
export interface LetterboxInfo {
  readonly gain: number;
  readonly padX: number;
  readonly padY: number;
  readonly width: number;
  readonly height: number;
}

/** An image prepared for the model: [3, S, S] planar float values, and how to map boxes back (letterbox only). */
export interface PreparedImage {
  readonly chw: Float32Array;
  readonly letterbox: LetterboxInfo | null;
}

/** Python 3's round(): to the nearest integer, halves to even. */
export function pyRound(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

const clamp8 = (v: number) => (v <= 0 ? 0 : v >= 255 ? 255 : Math.round(v));

/** cv2.resize(INTER_LINEAR) in float: source x = (x + 0.5) * scale - 0.5, clamped at the borders; rounded to 8 bits. */
export function resizeBilinearCv2(img: RgbImage, width: number, height: number): RgbImage {
  const out = new Uint8Array(width * height * 3);
  const sx = img.width / width;
  const sy = img.height / height;
  const tap = (dst: number, scale: number, size: number): [number, number, number] => {
    let f = (dst + 0.5) * scale - 0.5;
    let i = Math.floor(f);
    f -= i;
    if (i < 0) [i, f] = [0, 0];
    if (i >= size - 1) [i, f] = [size - 1, 0];
    return [i, Math.min(i + 1, size - 1), f];
  };
  const xs = Array.from({ length: width }, (_, x) => tap(x, sx, img.width));
  for (let y = 0; y < height; y++) {
    const [y0, y1, fy] = tap(y, sy, img.height);
    for (let x = 0; x < width; x++) {
      const [x0, x1, fx] = xs[x]!;
      for (let c = 0; c < 3; c++) {
        const p = (yy: number, xx: number) => img.data[(yy * img.width + xx) * 3 + c]!;
        const top = p(y0, x0) * (1 - fx) + p(y0, x1) * fx;
        const bottom = p(y1, x0) * (1 - fx) + p(y1, x1) * fx;
        out[(y * width + x) * 3 + c] = clamp8(top * (1 - fy) + bottom * fy);
      }
    }
  }
  return { width, height, data: out };
}

/** ultralytics LetterBox (see the file comment) to an S x S input, planar, / 255. */
export function letterbox(img: RgbImage, S: number, fill = 114): PreparedImage {
  const r = Math.min(S / img.height, S / img.width);
  const w = pyRound(img.width * r);
  const h = pyRound(img.height * r);
  const dw = (S - w) / 2;
  const dh = (S - h) / 2;
  const resized = w === img.width && h === img.height ? img : resizeBilinearCv2(img, w, h);
  const left = pyRound(dw - 0.1);
  const top = pyRound(dh - 0.1);
  const chw = new Float32Array(3 * S * S).fill(fill / 255);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      for (let c = 0; c < 3; c++) chw[c * S * S + (y + top) * S + x + left] = resized.data[(y * w + x) * 3 + c]! / 255;
    }
  }
  return { chw, letterbox: { gain: r, padX: left, padY: top, width: img.width, height: img.height } };
}

/**
 * ultralytics ops.scale_boxes(img1_shape=(S, S), boxes, img0_shape) with padding: x1 y1 x2 y2 in input pixels ->
 * original-image pixels (pad subtracted, divided by the gain, clipped to the image). `boxes` is K x 4, in place.
 */
export function scaleBoxes(boxes: Float64Array, S: number, info: Pick<LetterboxInfo, 'width' | 'height'>): Float64Array {
  const gain = Math.min(S / info.height, S / info.width);
  const padX = pyRound((S - info.width * gain) / 2 - 0.1);
  const padY = pyRound((S - info.height * gain) / 2 - 0.1);
  for (let i = 0; i < boxes.length; i += 4) {
    for (let j = 0; j < 4; j++) {
      const v = (boxes[i + j]! - (j % 2 === 0 ? padX : padY)) / gain;
      boxes[i + j] = Math.min(Math.max(v, 0), j % 2 === 0 ? info.width : info.height);
    }
  }
  return boxes;
}

/** PIL's filters: support radius and weight (bicubic with a = -0.5, as Pillow). */
const FILTERS = {
  bilinear: { support: 1, f: (x: number) => (x < 0 ? -x : x) < 1 ? 1 - Math.abs(x) : 0 },
  bicubic: {
    support: 2,
    f: (x: number) => {
      const a = -0.5;
      x = Math.abs(x);
      if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
      if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
      return 0;
    },
  },
} as const;

/** One axis of Pillow's convolution resample (antialiased when shrinking): per output index, source start and weights. */
function resampleTaps(inSize: number, outSize: number, filter: keyof typeof FILTERS): { start: number; weights: number[] }[] {
  const { support, f } = FILTERS[filter];
  const scale = inSize / outSize;
  const fscale = Math.max(scale, 1);
  const radius = support * fscale;
  return Array.from({ length: outSize }, (_, i) => {
    const centre = (i + 0.5) * scale;
    const start = Math.max(0, Math.floor(centre - radius + 0.5));
    const end = Math.min(inSize, Math.floor(centre + radius + 0.5));
    const weights: number[] = [];
    for (let j = start; j < end; j++) weights.push(f((j - centre + 0.5) / fscale));
    const sum = weights.reduce((a, b) => a + b, 0);
    return { start, weights: weights.map((w) => (sum ? w / sum : 0)) };
  });
}

/** PIL Image.resize((width, height), resample) in float, rounded to 8 bits after each pass as Pillow does. */
export function resizePil(img: RgbImage, width: number, height: number, filter: 'bilinear' | 'bicubic'): RgbImage {
  const hx = resampleTaps(img.width, width, filter);
  const mid = new Uint8Array(width * img.height * 3);
  for (let y = 0; y < img.height; y++) {
    for (let x = 0; x < width; x++) {
      const { start, weights } = hx[x]!;
      for (let c = 0; c < 3; c++) {
        let s = 0;
        for (let k = 0; k < weights.length; k++) s += weights[k]! * img.data[(y * img.width + start + k) * 3 + c]!;
        mid[(y * width + x) * 3 + c] = clamp8(s);
      }
    }
  }
  const vy = resampleTaps(img.height, height, filter);
  const out = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    const { start, weights } = vy[y]!;
    for (let x = 0; x < width; x++) {
      for (let c = 0; c < 3; c++) {
        let s = 0;
        for (let k = 0; k < weights.length; k++) s += weights[k]! * mid[((start + k) * width + x) * 3 + c]!;
        out[(y * width + x) * 3 + c] = clamp8(s);
      }
    }
  }
  return { width, height, data: out };
}

/** HF ConvNextImageProcessor (see the file comment) to an S x S input, planar, normalised. */
export function imageProcessorResize(img: RgbImage, S: number, spec: Extract<ImagePreprocess, { kind: 'resize' }>): PreparedImage {
  let resized: RgbImage;
  let x0 = 0;
  let y0 = 0;
  if (spec.cropPct !== null) {
    // get_resize_output_image_size(default_to_square=False): the short side to int(S / crop_pct), the long one scaled
    const short = Math.trunc(S / spec.cropPct);
    const portrait = img.height > img.width;
    const long = Math.trunc((short * (portrait ? img.height : img.width)) / (portrait ? img.width : img.height));
    const [w, h] = portrait ? [short, long] : [long, short];
    resized = resizePil(img, w, h, spec.resample);
    // center_crop: top = (h - S) // 2, left = (w - S) // 2
    x0 = Math.floor((w - S) / 2);
    y0 = Math.floor((h - S) / 2);
  } else resized = resizePil(img, S, S, spec.resample);
  const chw = new Float32Array(3 * S * S);
  for (let c = 0; c < 3; c++) {
    for (let y = 0; y < S; y++) {
      for (let x = 0; x < S; x++) chw[c * S * S + y * S + x] = (resized.data[((y + y0) * resized.width + x + x0) * 3 + c]! / 255 - spec.mean[c]!) / spec.std[c]!;
    }
  }
  return { chw, letterbox: null };
}

/** The model's preprocessing of one image. */
export function prepareImage(img: RgbImage, S: number, spec: ImagePreprocess): PreparedImage {
  return spec.kind === 'letterbox' ? letterbox(img, S, spec.fill) : imageProcessorResize(img, S, spec);
}
