/**
 * The images a vision command runs on: `--image FILE` (one) or `--images DIR` (the folder's PNG / JPEG files, sorted).
 * Checked before the model loads, so a wrong path fails at once, naming the flag.
 */
import { statSync } from 'node:fs';
import { UserError } from '@fastkernels/core';
import { listImages } from './images.js';

export interface ImageSource {
  readonly files: readonly string[];
  /** The flag the files came from (named in errors about them). */
  readonly flag: '--image' | '--images';
}

export function imageSource(argv: { image?: string | undefined; images?: string | undefined }): ImageSource {
  if (argv.image !== undefined && argv.images !== undefined) throw new UserError('--image and --images were both given', { field: '--image', fix: 'pass one image with --image FILE, or a folder with --images DIR' });
  if (argv.image === undefined && argv.images === undefined) throw new UserError('no images given', { field: '--image', fix: 'pass one image with --image FILE, or a folder with --images DIR' });
  if (argv.images !== undefined) {
    const dir = String(argv.images);
    if (isFile(dir)) throw new UserError(`${dir} is a file, not a folder`, { field: '--images', fix: `pass it with --image ${dir}` });
    return { files: listImages(dir), flag: '--images' };
  }
  const file = String(argv.image);
  let st;
  try {
    st = statSync(file);
  } catch {
    throw new UserError(`${file}: no such file`, { field: '--image', fix: 'check the path (a PNG or JPEG file)' });
  }
  if (st.isDirectory()) throw new UserError(`${file} is a folder`, { field: '--image', fix: `run the folder's images with --images ${file}` });
  return { files: [file], flag: '--image' };
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
