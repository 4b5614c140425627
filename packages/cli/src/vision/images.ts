/**
 * Image files to 8-bit RGB (model-zoo's RgbImage), with maintained pure-JS decoders: PNG by fast-png (8 / 16-bit,
 * gray, gray + alpha, RGB, RGBA, palette), JPEG by jpeg-js (baseline and progressive). Alpha is dropped, as
 * cv2.imread(IMREAD_COLOR) and PIL's convert('RGB') do; 16-bit samples keep their high byte. EXIF orientation is not
 * applied. The format comes from the file's magic bytes, not its name.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { UserError } from '@fastkernels/core';
import type { RgbImage } from '@fastkernels/model-zoo';
import { decode as decodePng } from 'fast-png';
import { decode as decodeJpeg } from 'jpeg-js';

/** Extensions `--images DIR` picks up (case-insensitive). */
export const IMAGE_EXTENSIONS = ['.png', '.jpg', '.jpeg'] as const;

const isPng = (b: Uint8Array) => b.length > 8 && b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47;
const isJpeg = (b: Uint8Array) => b.length > 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff;

/** PNG bytes to RGB8. */
export function pngToRgb(bytes: Uint8Array): RgbImage {
  const png = decodePng(bytes);
  const { width, height, channels, depth } = png;
  const src = png.data;
  const out = new Uint8Array(width * height * 3);
  // depth 1 / 2 / 4 (one channel: gray or palette indices) stays bit-packed, rows padded to whole bytes
  const rowBytes = Math.ceil((width * depth) / 8);
  const packed = (p: number) => {
    const y = Math.floor(p / width);
    const bit = (p % width) * depth;
    return (src[y * rowBytes + (bit >> 3)]! >> (8 - depth - (bit & 7))) & ((1 << depth) - 1);
  };
  const raw = (i: number) => (depth < 8 ? packed(i) : src[i]!);
  const sample = (i: number) => (depth === 16 ? src[i]! >> 8 : depth < 8 ? Math.round((packed(i) * 255) / (2 ** depth - 1)) : src[i]!);
  for (let p = 0; p < width * height; p++) {
    if (png.palette) {
      const entry = png.palette[raw(p)]!;
      out.set([entry[0]!, entry[1]!, entry[2]!], p * 3);
    } else if (channels >= 3) {
      for (let c = 0; c < 3; c++) out[p * 3 + c] = sample(p * channels + c);
    } else {
      const g = sample(p * channels);
      out[p * 3] = out[p * 3 + 1] = out[p * 3 + 2] = g;
    }
  }
  return { width, height, data: out };
}

/** JPEG bytes to RGB8. */
export function jpegToRgb(bytes: Uint8Array): RgbImage {
  const img = decodeJpeg(bytes, { useTArray: true, formatAsRGBA: false, maxMemoryUsageInMB: 1024 });
  return { width: img.width, height: img.height, data: img.data };
}

/** Read and decode one image file; a UserError naming the file when it cannot. */
export function readImage(file: string, flag = '--image'): RgbImage {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(file);
  } catch (e) {
    throw new UserError(`cannot read ${file}: ${(e as Error).message}`, { field: flag, fix: 'check the path (a PNG or JPEG file)' });
  }
  try {
    if (isPng(bytes)) return pngToRgb(bytes);
    if (isJpeg(bytes)) return jpegToRgb(bytes);
  } catch (e) {
    throw new UserError(`${file}: not a decodable image: ${(e as Error).message}`, { field: flag, fix: 'pass a PNG or JPEG file' });
  }
  throw new UserError(`${file}: not a PNG or JPEG image (by its first bytes)`, { field: flag, fix: 'pass a PNG or JPEG file' });
}

/** The PNG / JPEG files of a folder (by extension, not recursive), sorted by name. */
export function listImages(dir: string): string[] {
  let names: string[];
  try {
    if (!statSync(dir).isDirectory()) throw new Error('not a folder');
    names = readdirSync(dir);
  } catch (e) {
    throw new UserError(`cannot list ${dir}: ${(e as Error).message}`, { field: '--images', fix: 'pass a folder of PNG / JPEG images' });
  }
  const files = names.filter((n) => (IMAGE_EXTENSIONS as readonly string[]).includes(extname(n).toLowerCase())).sort().map((n) => join(dir, n));
  if (!files.length) throw new UserError(`no PNG or JPEG images in ${dir}`, { field: '--images', fix: `put ${IMAGE_EXTENSIONS.join(' / ')} files there` });
  return files;
}
