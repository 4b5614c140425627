/**
 * classify on the CPU with the tiny ConvNeXt-V2 fixture (random weights, 5 labels) and PNG / JPEG images written here:
 * the predictions are softmax's best of the model's own logits on HF's preprocessed pixels (computed here in float64),
 * named by id2label (HF's LABEL_<i> without one); a folder, --top, --json's schema; bad input is exit 2.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor, withContext } from '@fastkernels/core';
import { baselineRegistry, imageProcessorResize, loadVisionModel, type RgbImage } from '@fastkernels/model-zoo';
import { encode as encodePng } from 'fast-png';
import { decode as decodeJpeg, encode as encodeJpeg } from 'jpeg-js';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../app.js';
import { ClassifyReportSchema, type ClassifyReport } from '../vision/report.js';
import { runClassify, type ClassifyArgs } from './classify.js';

const ROOT = resolve(import.meta.dirname, '../../../..');
const FIXTURE = join(ROOT, 'packages/model-zoo/fixtures/tiny-convnextv2');
const LABELS = ['cat', 'dog', 'bird', 'fish', 'frog'];
const tmp = mkdtempSync(join(tmpdir(), 'fk-classify-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Seeded smooth noise (a few random sinusoids per channel), so the resize and crop matter. */
function picture(width: number, height: number, seed: number): RgbImage {
  const rng = new Rng(seed);
  const waves = Array.from({ length: 3 }, () => [rng.uniform() * 0.5, rng.uniform() * 0.5, rng.uniform() * 6]);
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) for (let c = 0; c < 3; c++) data[(y * width + x) * 3 + c] = Math.round(127.5 + 127.5 * Math.sin(waves[c]![0]! * x + waves[c]![1]! * y + waves[c]![2]!));
  return { width, height, data };
}
const writePng = (file: string, img: RgbImage) => writeFileSync(file, encodePng({ width: img.width, height: img.height, data: img.data, channels: 3, depth: 8 }));
function writeJpeg(file: string, img: RgbImage): void {
  const rgba = new Uint8Array(img.width * img.height * 4).fill(255);
  for (let p = 0; p < img.width * img.height; p++) rgba.set(img.data.subarray(p * 3, p * 3 + 3), p * 4);
  writeFileSync(file, encodeJpeg({ width: img.width, height: img.height, data: rgba }, 90).data);
}

const base: ClassifyArgs = { model: FIXTURE, top: 5, batch: 8, backend: 'cpu', dtype: 'f32', initSeed: 0, json: true };
function classify(args: Partial<ClassifyArgs>): { report: ClassifyReport; out: string; err: string } {
  let out = '';
  let err = '';
  runClassify({ ...base, ...args }, { out: (s) => (out += s), err: (s) => (err += s) });
  return { report: args.json === false ? (null as unknown as ClassifyReport) : ClassifyReportSchema.parse(JSON.parse(out)), out, err };
}

writeJpeg(join(tmp, 'a.jpg'), picture(60, 45, 1));
writePng(join(tmp, 'b.png'), picture(33, 70, 2));

describe('classify (ConvNeXt-V2 on the vision runner)', () => {
  it("one JPEG: softmax's best five of the model's logits on HF's resized, cropped, normalised pixels, named by id2label", () => {
    const { report, err } = classify({ image: join(tmp, 'a.jpg') });
    expect(report).toMatchObject({ task: 'classify', architecture: 'convnextv2', weights: 'random', image_size: 32, top: 5, error: null });
    expect(report.images[0]).toMatchObject({ width: 60, height: 45 });
    expect(err).toMatch(/classify: 1 image in [\d.]+ s: [\d.]+ images\/s/);
    // independently: jpeg-js' pixels through the model's preprocessing and forward, softmax in float64 here
    const jpeg = decodeJpeg(readFileSync(join(tmp, 'a.jpg')), { useTArray: true, formatAsRGBA: false });
    const loaded = loadVisionModel(FIXTURE, { backend: new CpuBackend(), registry: baselineRegistry(), dtype: 'f32' });
    const S = loaded.model.imageSize;
    if (loaded.model.preprocess.kind !== 'resize') throw new Error('ConvNeXt-V2 resizes');
    const chw = imageProcessorResize({ width: jpeg.width, height: jpeg.height, data: jpeg.data }, S, loaded.model.preprocess).chw;
    const logits = withContext(loaded.ctx, () => loaded.model.forward(Tensor.fromArray(loaded.ctx.backend, chw, [1, 3, S, S], 'f32'))).toFloat64Array();
    loaded.model.dispose();
    const z = logits.reduce((s, v) => s + Math.exp(v), 0);
    const want = [...logits].map((v, i) => ({ class: i, confidence: Math.exp(v) / z })).sort((p, q) => q.confidence - p.confidence);
    const got = report.images[0]!.predictions;
    expect(got.map((p) => p.class)).toEqual(want.map((p) => p.class));
    expect(got.map((p) => p.name)).toEqual(want.map((p) => LABELS[p.class]));
    got.forEach((p, i) => expect(p.confidence).toBeCloseTo(want[i]!.confidence, 6));
    expect(got.reduce((s, p) => s + p.confidence, 0)).toBeCloseTo(1, 9);
  });

  it('a folder with --top 2: each image as alone; readable lines without --json; HF names LABEL_<i> without id2label', () => {
    const dir = join(tmp, 'folder');
    mkdirSync(dir);
    writeJpeg(join(dir, 'x.jpg'), picture(60, 45, 1));
    writePng(join(dir, 'y.png'), picture(33, 70, 2));
    writePng(join(dir, 'z.png'), picture(32, 32, 3));
    const { report } = classify({ images: dir, top: 2, batch: 2 });
    expect(report.images.map((i) => i.predictions.length)).toEqual([2, 2, 2]);
    const alone = classify({ image: join(tmp, 'b.png'), top: 2 }).report.images[0]!.predictions;
    expect(report.images[1]!.predictions.map((p) => p.class)).toEqual(alone.map((p) => p.class));
    report.images[1]!.predictions.forEach((p, i) => expect(p.confidence).toBeCloseTo(alone[i]!.confidence, 9));
    const { out } = classify({ images: dir, top: 2, json: false });
    expect(out.trim().split('\n').map((l) => l.replace(/^.*\//, ''))).toEqual(report.images.map((im) => `${im.file.replace(/^.*\//, '')} ${im.width}x${im.height}: ${im.predictions.map((p) => `${p.name} ${p.confidence.toFixed(3)}`).join(', ')}`));
    const model = join(tmp, 'unlabelled');
    mkdirSync(model);
    const cfg = JSON.parse(readFileSync(join(FIXTURE, 'config.json'), 'utf8'));
    delete cfg.id2label;
    delete cfg.label2id;
    writeFileSync(join(model, 'config.json'), JSON.stringify({ ...cfg, num_labels: 5 }));
    const unnamed = classify({ model, image: join(tmp, 'b.png') }).report.images[0]!.predictions;
    expect(unnamed.map((p) => p.name)).toEqual(unnamed.map((p) => `LABEL_${p.class}`));
  });

  it('bad input: a detector, --top 0, a missing image (exit 2, the flag and the fix)', async () => {
    const cli = async (args: string[]) => {
      let err = '';
      const code = await main(['classify', '--backend', 'cpu', ...args], { out: () => {}, err: (s) => (err += s) });
      return { code, err };
    };
    const yolo = await cli(['--model', join(ROOT, 'packages/model-zoo/fixtures/tiny-yolov10'), '--image', join(tmp, 'b.png')]);
    expect(yolo.code).toBe(2);
    expect(yolo.err).toMatch(/--model: .*is an object detector \(yolov10\): it gives boxes, not one class per image\nfix: run `.*detect --model/);
    const top = await cli(['--model', FIXTURE, '--image', join(tmp, 'b.png'), '--top', '0']);
    expect([top.code, top.err]).toEqual([2, expect.stringMatching(/--top: must be an integer from 1/)]);
    const missing = await cli(['--model', FIXTURE, '--image', join(tmp, 'none.jpg')]);
    expect([missing.code, missing.err]).toEqual([2, expect.stringMatching(/--image: .*none\.jpg: no such file\nfix: check the path/)]);
  });
});
