/**
 * `fastkernels classify --model DIR (--image FILE | --images DIR) [--top 5]`: an image classifier (ConvNeXt-V2) on the
 * vision runner, as HF's image-classification pipeline: each image through the model's image processor (resize,
 * centre crop, normalise), softmax over the logits, the `--top` best classes named by config.json's id2label (HF's
 * LABEL_<i> without one).
 */
import type { Argv } from 'yargs';
import { topK } from '@fastkernels/model-zoo';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';
import { Progress } from '../output/progress.js';
import { finishReport, openVision, runFields, visionOptions, type VisionArgs } from '../vision/command.js';
import { ClassifyReportSchema } from '../vision/report.js';
import { runImages, type RanImage } from '../vision/run-images.js';

export interface ClassifyArgs extends VisionArgs {
  top: number;
}

export function classifyCommand(io: Io) {
  return {
    command: 'classify',
    describe: 'Classify images with an image classifier folder (ConvNeXt-V2): the top classes and their probabilities',
    builder: (y: Argv) =>
      visionOptions(y)
        .option('top', { type: 'number', default: 5, describe: 'classes to report per image, best first' })
        .example('$0 classify --model convnextv2-base-22k-384 --image cat.jpg', 'the top 5 ImageNet classes')
        .example('$0 classify --model packages/model-zoo/fixtures/tiny-convnextv2 --images imgs --top 2 --backend cpu --json', 'the tiny fixture on the CPU (random weights)'),
    handler: (argv: ClassifyArgs) => runClassify(argv, io),
  };
}

/** The command's body (tests call it with a captured Io). */
export function runClassify(argv: ClassifyArgs, io: Io, progressStream?: NodeJS.WriteStream): void {
  const top = intFlag('top', argv.top, 1, 100_000);
  const session = openVision(argv, 'classify');
  try {
    const labels = session.loaded.model.labels ?? null;
    const toImage = (im: RanImage) => {
      const r = im.result;
      if (r.kind !== 'logits') throw new Error(`classify: the runner gave ${r.kind}, not logits`);
      const predictions = topK(r.logits, Math.min(top, r.logits.length)).map(({ index, score }) => ({ name: labels?.[index] ?? `LABEL_${index}`, class: index, confidence: score }));
      return { file: im.file, width: im.width, height: im.height, predictions };
    };
    const progress = new Progress({ force: Boolean(argv.progress), ...(progressStream ? { stream: progressStream } : {}) });
    const run = runImages(session.runner, session.source, { batch: session.batch, progress, verb: 'classify' }, toImage);
    const fields = runFields(argv, session, run);
    finishReport(argv, io, {
      schema: ClassifyReportSchema,
      report: { schema_version: 1, task: 'classify', ...fields, top, images: run.results },
      run,
      source: session.source,
      human: () => run.results.map((im) => `${im.file} ${im.width}x${im.height}: ${im.predictions.map((p) => `${p.name} ${p.confidence.toFixed(3)}`).join(', ')}`).join('\n') + '\n',
      summary: `classify: ${run.results.length} image${run.results.length === 1 ? '' : 's'} in ${run.seconds.toFixed(2)} s: ${fields.timings.images_per_s.toFixed(1)} images/s (forwards alone ${fields.timings.forward_images_per_s.toFixed(1)}), ${session.loaded.architecture.name} ${fields.dtype} on ${fields.backend}${fields.weights === 'checkpoint' ? '' : ', random weights'}`,
    });
  } finally {
    session.dispose();
  }
}
