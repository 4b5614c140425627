/**
 * `fastkernels detect --model DIR (--image FILE | --images DIR) [--out boxes.json] [--conf 0.25] [--max-det N]`: an
 * object detector (YOLOv10) on the vision runner, as ultralytics' YOLOv10DetectionPredictor: each image letterboxed to
 * the model's size, the NMS-free top-k (v10postprocess, max_det), detections with confidence > conf kept, boxes mapped
 * back to the original image by scale_boxes. Classes are named by config.json's names (ultralytics' model.names),
 * else by their id. A folder gets a progress bar on stderr and images/s at the end.
 */
import { UserError } from '@fastkernels/core';
import { scaleBoxes } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import type { Io } from '../io.js';
import { Progress } from '../output/progress.js';
import { finishReport, openVision, runFields, visionOptions, type VisionArgs } from '../vision/command.js';
import { DetectReportSchema, type Detection } from '../vision/report.js';
import { runImages, type RanImage } from '../vision/run-images.js';

export interface DetectArgs extends VisionArgs {
  conf: number;
  maxDet?: number;
}

export function detectCommand(io: Io) {
  return {
    command: 'detect',
    describe: 'Detect objects in images with a detector folder (YOLOv10): boxes in image pixels, classes, confidences',
    builder: (y: Argv) =>
      visionOptions(y)
        .option('conf', { type: 'number', default: 0.25, describe: 'keep detections with confidence above this (ultralytics conf)' })
        .option('max-det', { type: 'number', describe: "detections per image before --conf (ultralytics max_det; default and most: config.json's max_det)" })
        .example('$0 detect --model yolov10n --image bus.jpg --out boxes.json', 'one image')
        .example('$0 detect --model yolov10n --images photos/ --batch 32 --json > boxes.json', 'a folder, 32 images per forward')
        .example('$0 detect --model packages/model-zoo/fixtures/tiny-yolov10 --images imgs --backend cpu', 'the tiny fixture on the CPU (random weights)'),
    handler: (argv: DetectArgs) => runDetect(argv, io),
  };
}

/** The command's body (tests call it with a captured Io). */
export function runDetect(argv: DetectArgs, io: Io, progressStream?: NodeJS.WriteStream): void {
  if (typeof argv.conf !== 'number' || !(argv.conf >= 0 && argv.conf <= 1)) throw new UserError(`must be a number from 0 to 1, got ${JSON.stringify(argv.conf)}`, { field: '--conf', fix: 'pass --conf 0.25 (ultralytics: detections above it are kept)' });
  const session = openVision(argv, 'detect');
  try {
    const modelMaxDet = (session.loaded.config as { maxDet: number }).maxDet;
    const maxDet = argv.maxDet === undefined ? modelMaxDet : intFlagMaxDet(argv.maxDet, modelMaxDet);
    const labels = session.loaded.model.labels ?? null;
    const S = session.runner.imageSize;
    const toImage = (im: RanImage) => {
      const r = im.result;
      if (r.kind !== 'detections') throw new Error(`detect: the runner gave ${r.kind}, not detections`);
      // the runner's top-k is best first: the first max_det of it are v10postprocess at max_det, then ultralytics' conf
      const K = Math.min(maxDet, r.scores.length);
      const keep = Array.from({ length: K }, (_, i) => i).filter((i) => r.scores[i]! > argv.conf);
      const boxes = scaleBoxes(Float64Array.from(keep.flatMap((i) => [...r.boxes.subarray(i * 4, i * 4 + 4)])), S, im);
      const detections: Detection[] = keep.map((i, j) => {
        const c = r.classes[i]!;
        return { name: labels?.[c] ?? String(c), class: c, confidence: r.scores[i]!, box: { x1: boxes[j * 4]!, y1: boxes[j * 4 + 1]!, x2: boxes[j * 4 + 2]!, y2: boxes[j * 4 + 3]! } };
      });
      return { file: im.file, width: im.width, height: im.height, detections };
    };
    const progress = new Progress({ force: Boolean(argv.progress), ...(progressStream ? { stream: progressStream } : {}) });
    const run = runImages(session.runner, session.source, { batch: session.batch, progress, verb: 'detect' }, toImage);
    const fields = runFields(argv, session, run);
    const objects = run.results.reduce((n, im) => n + im.detections.length, 0);
    finishReport(argv, io, {
      schema: DetectReportSchema,
      report: { schema_version: 1, task: 'detect', ...fields, conf: argv.conf, max_det: maxDet, images: run.results },
      run,
      source: session.source,
      human: () => run.results.map((im) => [`${im.file} ${im.width}x${im.height}: ${im.detections.length} object${im.detections.length === 1 ? '' : 's'}`, ...im.detections.map((d) => `  ${d.name === String(d.class) ? `class ${d.class}` : d.name} ${d.confidence.toFixed(3)} [${[d.box.x1, d.box.y1, d.box.x2, d.box.y2].map((v) => v.toFixed(1)).join(', ')}]`)].join('\n')).join('\n') + '\n',
      summary: `detect: ${run.results.length} image${run.results.length === 1 ? '' : 's'}, ${objects} object${objects === 1 ? '' : 's'} (confidence > ${argv.conf}) in ${run.seconds.toFixed(2)} s: ${fields.timings.images_per_s.toFixed(1)} images/s (forwards alone ${fields.timings.forward_images_per_s.toFixed(1)}), ${session.loaded.architecture.name} ${fields.dtype} on ${fields.backend}${session.runner.usesGraphs ? `, ${fields.timings.graph_captures} CUDA graph${fields.timings.graph_captures === 1 ? '' : 's'}` : ''}${fields.weights === 'checkpoint' ? '' : ', random weights'}`,
    });
  } finally {
    session.dispose();
  }
}

/** --max-det: at most what the model's top-k keeps (config.json's max_det). */
function intFlagMaxDet(v: number, most: number): number {
  if (!Number.isInteger(v) || v < 1) throw new UserError(`must be a positive integer, got ${JSON.stringify(v)}`, { field: '--max-det', fix: `pass --max-det N with 1 <= N <= ${most}` });
  if (v > most) throw new UserError(`${v} is more than the model keeps: its top-k runs at max_det ${most} (config.json)`, { field: '--max-det', fix: `pass --max-det ${most} or less, or raise max_det in the model's config.json` });
  return v;
}
