/**
 * The image loop of detect / classify: files decoded a batch at a time (never the whole folder in memory), prepared as
 * the model's preprocessing says, run through the vision runner, each result handed to the command with its image's
 * size and letterbox. A file that cannot be read or decoded stops the run there: the images before it have run (the
 * rest of its batch included) and are returned with the file and its error, so the command writes what was done.
 */
import { UserError } from '@fastkernels/core';
import { prepareImage, type LetterboxInfo, type VisionResult, type VisionRunner } from '@fastkernels/model-zoo';
import { progressBar } from '../commands/generate-image.js';
import type { Progress } from '../output/progress.js';
import { readImage } from './images.js';
import type { ImageSource } from './sources.js';

/** One image through the model. */
export interface RanImage {
  readonly file: string;
  readonly width: number;
  readonly height: number;
  /** Where the image sits in the model input (letterboxing models), else null. */
  readonly letterbox: LetterboxInfo | null;
  readonly result: VisionResult;
}

export interface ImageRun<T> {
  readonly results: T[];
  /** The file the run stopped at and why; null when every image ran. */
  readonly failed: { readonly file: string; readonly error: UserError } | null;
  /** Wall seconds of the loop: decoding, preprocessing, forwards (graph captures included). */
  readonly seconds: number;
}

export interface RunImagesOptions {
  readonly batch: number;
  readonly progress: Progress;
  /** The progress line's first word (`detect`, `classify`). */
  readonly verb: string;
}

export function runImages<T>(runner: VisionRunner, source: ImageSource, opts: RunImagesOptions, each: (image: RanImage) => T): ImageRun<T> {
  const { files, flag } = source;
  const S = runner.imageSize;
  const spec = runner.model.preprocess;
  const results: T[] = [];
  let failed: ImageRun<T>['failed'] = null;
  const t0 = performance.now();
  const show = (done: number) => {
    const rate = done / Math.max(1e-9, (performance.now() - t0) / 1000);
    opts.progress.update(`${opts.verb} ${progressBar(done, files.length)} ${done}/${files.length} images${done ? `, ${rate.toFixed(1)} images/s` : ''}`, String(done));
  };
  if (files.length > 1) show(0);
  for (let start = 0; start < files.length && !failed; start += opts.batch) {
    const batch: Omit<RanImage, 'result'>[] = [];
    const inputs: Float32Array[] = [];
    for (const file of files.slice(start, start + opts.batch)) {
      let decoded;
      try {
        decoded = readImage(file, flag);
      } catch (e) {
        if (!(e instanceof UserError)) throw e;
        failed = { file, error: e };
        break;
      }
      const prepared = prepareImage(decoded, S, spec);
      batch.push({ file, width: decoded.width, height: decoded.height, letterbox: prepared.letterbox });
      inputs.push(prepared.chw);
    }
    if (!inputs.length) break;
    runner.run(inputs).forEach((result, i) => results.push(each({ ...batch[i]!, result })));
    if (files.length > 1) show(results.length);
  }
  opts.progress.clear();
  return { results, failed, seconds: (performance.now() - t0) / 1000 };
}
