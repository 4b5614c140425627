/**
 * detect on the CPU with the tiny YOLOv10 fixture (random weights, BatchNorms calibrated) and PNG / JPEG images written
 * here: boxes equal the model's own detect() after LetterBox and scale_boxes; --conf / --max-det are ultralytics' filter
 * on the top-k; a folder runs in batches with a progress bar and the same results per image; --json / --out are one
 * document of the schema; init-weights writes a calibrated checkpoint (non-degenerate scores); each bad input is exit 2
 * naming the file or flag and the fix, and a bad file mid-folder keeps what ran before it.
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Rng, Tensor, withContext } from '@fastkernels/core';
import { baselineRegistry, letterbox, loadVisionModel, scaleBoxes, type RgbImage } from '@fastkernels/model-zoo';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { encode as encodePng } from 'fast-png';
import { encode as encodeJpeg } from 'jpeg-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../app.js';
import { DetectReportSchema, type DetectReport } from '../vision/report.js';
import { runDetect, type DetectArgs } from './detect.js';
import { runInitWeights } from './init-weights.js';

const ROOT = resolve(import.meta.dirname, '../../../..');
const FIXTURE = join(ROOT, 'packages/model-zoo/fixtures/tiny-yolov10');
const tmp = mkdtempSync(join(tmpdir(), 'fk-detect-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
// init-weights' calibrated checkpoint of the fixture: loading it skips the calibration forward a config-only folder runs
const CKPT = join(tmp, 'ckpt');
let initSaid = '';
beforeAll(() => runInitWeights({ config: join(FIXTURE, 'config.json'), out: CKPT, seed: 0, dtype: 'f32' }, { out: (s) => (initSaid += s), err: () => {} }), 120_000);

/** A seeded picture: a colour gradient with a few solid rectangles (something for a detector to respond to). */
function picture(width: number, height: number, seed: number): RgbImage {
  const rng = new Rng(seed);
  const data = new Uint8Array(width * height * 3);
  const [r0, g0, b0] = [0, 0, 0].map(() => Math.floor(rng.uniform() * 255));
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) data.set([(r0! + x * 3) % 256, (g0! + y * 5) % 256, (b0! + x + y) % 256], (y * width + x) * 3);
  for (let k = 0; k < 3; k++) {
    const [x0, y0] = [Math.floor(rng.uniform() * width * 0.7), Math.floor(rng.uniform() * height * 0.7)];
    const [w, h] = [Math.max(2, Math.floor(rng.uniform() * width * 0.4)), Math.max(2, Math.floor(rng.uniform() * height * 0.4))];
    const colour = [0, 0, 0].map(() => Math.floor(rng.uniform() * 256));
    for (let y = y0; y < Math.min(height, y0 + h); y++) for (let x = x0; x < Math.min(width, x0 + w); x++) data.set(colour, (y * width + x) * 3);
  }
  return { width, height, data };
}

const writePng = (file: string, img: RgbImage) => writeFileSync(file, encodePng({ width: img.width, height: img.height, data: img.data, channels: 3, depth: 8 }));
function writeJpeg(file: string, img: RgbImage): void {
  const rgba = new Uint8Array(img.width * img.height * 4).fill(255);
  for (let p = 0; p < img.width * img.height; p++) rgba.set(img.data.subarray(p * 3, p * 3 + 3), p * 4);
  writeFileSync(file, encodeJpeg({ width: img.width, height: img.height, data: rgba }, 90).data);
}

const base: DetectArgs = { model: CKPT, conf: 0.25, batch: 8, backend: 'cpu', dtype: 'f32', initSeed: 0, json: true };

function detect(args: Partial<DetectArgs>, progress?: NodeJS.WriteStream): { report: DetectReport; out: string; err: string } {
  let out = '';
  let err = '';
  runDetect({ ...base, ...args }, { out: (s) => (out += s), err: (s) => (err += s) }, progress);
  return { report: args.json === false ? (null as unknown as DetectReport) : DetectReportSchema.parse(JSON.parse(out)), out, err };
}

/** The CLI as a user runs it (exit code, stdout, stderr), in process. */
async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(args, { out: (s) => (out += s), err: (s) => (err += s) });
  return { code, out, err };
}

const wide = picture(100, 50, 1);
const tall = picture(48, 80, 2);
writePng(join(tmp, 'wide.png'), wide);
writeJpeg(join(tmp, 'tall.jpg'), tall);

describe('detect (YOLOv10 on the vision runner)', () => {
  it("one PNG: the boxes are the model's own detect() after LetterBox and scale_boxes, in image pixels; scores are not degenerate", () => {
    const { report, err } = detect({ image: join(tmp, 'wide.png'), conf: 0 });
    expect(report).toMatchObject({ task: 'detect', architecture: 'yolov10', backend: 'cpu', dtype: 'f32', weights: 'checkpoint', image_size: 64, conf: 0, max_det: 20, error: null });
    expect(err).toMatch(/detect: 1 image, 20 objects \(confidence > 0\) in [\d.]+ s: [\d.]+ images\/s/);
    const [im] = report.images;
    expect(im).toMatchObject({ file: join(tmp, 'wide.png'), width: 100, height: 50 });
    // independently: the unfused model on the letterboxed pixels, its top-k mapped back by scale_boxes
    const loaded = loadVisionModel(CKPT, { backend: new CpuBackend(), registry: baselineRegistry(), dtype: 'f32' });
    const S = loaded.model.imageSize;
    const prepared = letterbox(wide, S, 114);
    const want = withContext(loaded.ctx, () => {
      const x = Tensor.fromArray(loaded.ctx.backend, prepared.chw, [1, 3, S, S], 'f32');
      const d = loaded.model.detect!(x);
      const r = { boxes: scaleBoxes(d.boxes.toFloat64Array(), S, wide), scores: d.scores.toFloat64Array(), classes: [...d.classes.toFloat64Array()] };
      for (const t of [x, d.boxes, d.scores, d.classes]) t.dispose();
      return r;
    });
    loaded.model.dispose();
    expect(im!.detections.map((d) => d.class)).toEqual(want.classes);
    expect(im!.detections.map((d) => d.name)).toEqual(want.classes.map(String)); // no names in config.json: ultralytics names a class by its id
    im!.detections.forEach((d, i) => {
      expect(d.confidence).toBeCloseTo(want.scores[i]!, 5);
      [d.box.x1, d.box.y1, d.box.x2, d.box.y2].forEach((v, j) => expect(Math.abs(v - want.boxes[i * 4 + j]!)).toBeLessThan(1e-3));
      expect(d.box.x2).toBeLessThanOrEqual(100);
      expect(d.box.y2).toBeLessThanOrEqual(50);
    });
    const scores = im!.detections.map((d) => d.confidence);
    expect(Math.max(...scores) - Math.min(...scores)).toBeGreaterThan(0.05);
  });

  it("--conf keeps confidences above it and --max-det the first N of the top-k (ultralytics' order: top-k, then conf)", () => {
    const all = detect({ image: join(tmp, 'wide.png'), conf: 0 }).report.images[0]!.detections;
    const conf = (all[2]!.confidence + all[3]!.confidence) / 2;
    const some = detect({ image: join(tmp, 'wide.png'), conf, maxDet: 6 }).report;
    expect(some).toMatchObject({ conf, max_det: 6 });
    expect(some.images[0]!.detections).toEqual(all.slice(0, 6).filter((d) => d.confidence > conf));
    expect(some.images[0]!.detections.length).toBe(3);
  });

  it('a folder (PNG and JPEG, other files ignored) runs in batches with a progress bar; each image as when run alone; --out is the same document', () => {
    const dir = join(tmp, 'folder');
    mkdirSync(dir);
    writePng(join(dir, 'a.png'), wide);
    writeJpeg(join(dir, 'b.JPG'), tall);
    writePng(join(dir, 'c.png'), picture(64, 64, 3));
    writeJpeg(join(dir, 'd.jpeg'), picture(31, 17, 4));
    writePng(join(dir, 'e.png'), picture(200, 120, 5));
    writeFileSync(join(dir, 'notes.txt'), 'not an image');
    const lines: string[] = [];
    const stream = { isTTY: false, write: (s: string) => lines.push(s) } as unknown as NodeJS.WriteStream;
    const out = join(tmp, 'out', 'boxes.json');
    const { report, err } = detect({ images: dir, batch: 2, out, progress: true }, stream);
    expect(report.images.map((i) => i.file.slice(dir.length + 1))).toEqual(['a.png', 'b.JPG', 'c.png', 'd.jpeg', 'e.png']);
    expect(report.images.map((i) => [i.width, i.height])).toEqual([[100, 50], [48, 80], [64, 64], [31, 17], [200, 120]]);
    expect(lines[0]).toMatch(/^detect \[-+\] 0\/5 images\n$/);
    expect(lines.at(-1)).toMatch(/^detect \[#+\] 5\/5 images, [\d.]+ images\/s\n$/);
    expect(lines).toHaveLength(4); // 0, 2, 4, 5 done
    expect(err).toMatch(/detect: 5 images, \d+ objects? \(confidence > 0.25\) .* images\/s .*; wrote .*boxes\.json/);
    expect(DetectReportSchema.parse(JSON.parse(readFileSync(out, 'utf8')))).toEqual(report);
    const alone = detect({ image: join(dir, 'b.JPG') }).report.images[0]!;
    expect(report.images[1]!.detections.map((d) => d.class)).toEqual(alone.detections.map((d) => d.class));
    report.images[1]!.detections.forEach((d, i) => expect(d.confidence).toBeCloseTo(alone.detections[i]!.confidence, 6));
  });

  it("class names come from config.json's names; without --json or --out the detections are readable lines", () => {
    const model = join(tmp, 'named');
    cpSync(CKPT, model, { recursive: true });
    const cfg = JSON.parse(readFileSync(join(CKPT, 'config.json'), 'utf8'));
    writeFileSync(join(model, 'config.json'), JSON.stringify({ ...cfg, names: { 0: 'person', 1: 'bicycle', 2: 'car', 3: 'dog' } }));
    const named = detect({ model, image: join(tmp, 'wide.png'), conf: 0 }).report.images[0]!.detections;
    expect(named.map((d) => d.name)).toEqual(named.map((d) => ['person', 'bicycle', 'car', 'dog'][d.class]));
    const { out } = detect({ model, image: join(tmp, 'tall.jpg'), conf: 0, maxDet: 2, json: false });
    expect(out).toMatch(/^.*tall\.jpg 48x80: 2 objects\n {2}(person|bicycle|car|dog) 0\.\d{3} \[[\d.]+, [\d.]+, [\d.]+, [\d.]+\]\n {2}\w+ 0\.\d{3} \[.*\]\n$/);
  });

  it("init-weights writes calibrated weights: detect on the checkpoint is the config-only model's, scores spread over images and anchors", () => {
    expect(initSaid).toMatch(/wrote \d+ tensors/);
    const fromCkpt = detect({ image: join(tmp, 'wide.png'), conf: 0 }).report;
    const fromConfig = detect({ model: FIXTURE, image: join(tmp, 'wide.png'), conf: 0 }).report;
    expect([fromCkpt.weights, fromConfig.weights]).toEqual(['checkpoint', 'random']);
    const a = fromCkpt.images[0]!.detections;
    const b = fromConfig.images[0]!.detections;
    expect(a.map((d) => d.class)).toEqual(b.map((d) => d.class));
    a.forEach((d, i) => expect(d.confidence).toBeCloseTo(b[i]!.confidence, 5));
    const other = detect({ image: join(tmp, 'tall.jpg'), conf: 0 }).report.images[0]!.detections;
    const scores = [...a, ...other].map((d) => d.confidence);
    expect(Math.max(...scores) - Math.min(...scores)).toBeGreaterThan(0.05);
    expect(other.map((d) => d.confidence)).not.toEqual(a.map((d) => d.confidence));
  });
});

describe('detect: bad input is exit 2 naming the file or flag and the fix, never a stack', () => {
  const expectBad = async (args: string[], ...mentions: RegExp[]) => {
    const r = await cli(['detect', '--model', CKPT, '--backend', 'cpu', ...args]);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toMatch(/^fastkernels: error: /m); // after the summary of what ran, when a bad file stopped the run
    expect(r.err).toMatch(/\nfix: /);
    expect(r.err).not.toMatch(/^\s+at /m);
    for (const m of mentions) expect(r.err).toMatch(m);
    return r;
  };

  it('a missing file, a file that is not an image, a folder without images, --image on a folder, both or neither flag', async () => {
    await expectBad(['--image', join(tmp, 'nope.png')], /--image: .*nope\.png: no such file/, /fix: check the path/);
    writeFileSync(join(tmp, 'fake.png'), 'GIF89a not really');
    await expectBad(['--image', join(tmp, 'fake.png')], /--image: .*fake\.png: not a PNG or JPEG image/, /fix: pass a PNG or JPEG file/);
    writeFileSync(join(tmp, 'broken.png'), Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(20)]));
    await expectBad(['--image', join(tmp, 'broken.png')], /broken\.png: not a decodable image/);
    const empty = join(tmp, 'empty');
    mkdirSync(empty);
    writeFileSync(join(empty, 'readme.txt'), 'x');
    await expectBad(['--images', empty], /--images: no PNG or JPEG images in .*empty/, /fix: put \.png \/ \.jpg \/ \.jpeg files there/);
    await expectBad(['--image', empty], /--image: .*empty is a folder/, /fix: run the folder's images with --images/);
    await expectBad(['--images', join(tmp, 'wide.png')], /--images: .*wide\.png is a file/, /fix: pass it with --image/);
    await expectBad([], /no images given/, /--image FILE, or a folder with --images DIR/);
    await expectBad(['--image', join(tmp, 'wide.png'), '--images', tmp], /--image and --images were both given/);
  });

  it('flags out of range, a folder as --out, a non-vision model and a classifier', async () => {
    const img = join(tmp, 'wide.png');
    await expectBad(['--image', img, '--conf', '2'], /--conf: must be a number from 0 to 1/);
    await expectBad(['--image', img, '--max-det', '300'], /--max-det: 300 is more than the model keeps: its top-k runs at max_det 20/, /raise max_det in the model's config\.json/);
    await expectBad(['--image', img, '--batch', '0'], /--batch: must be an integer from 1/);
    await expectBad(['--image', img, '--out', tmp], /--out: .* is a folder/);
    const llama = await cli(['detect', '--model', join(ROOT, 'packages/model-zoo/fixtures/tiny-llama'), '--image', img, '--backend', 'cpu']);
    expect(llama.code).toBe(2);
    expect(llama.err).toMatch(/--model: .*tiny-llama is a decoder-llm model \(llama\), not a vision model\nfix: pass a vision model folder/);
    const convnext = join(ROOT, 'packages/model-zoo/fixtures/tiny-convnextv2');
    const c = await cli(['detect', '--model', convnext, '--image', img, '--backend', 'cpu']);
    expect(c.code).toBe(2);
    expect(c.err).toMatch(/--model: .*is an image classifier \(convnextv2\): it gives class scores, not boxes\nfix: run `.*classify --model/);
  });

  it('a bad file mid-folder: the images before it are written (--out and --json), then the bad file is the error', async () => {
    const dir = join(tmp, 'partial');
    mkdirSync(dir);
    writePng(join(dir, 'a.png'), wide);
    writeJpeg(join(dir, 'b.jpg'), tall);
    writeFileSync(join(dir, 'c.png'), 'this is text');
    writePng(join(dir, 'd.png'), wide);
    const out = join(tmp, 'partial.json');
    const r = await expectBad(['--images', dir, '--batch', '2', '--out', out, '--json'], /--images: .*c\.png: not a PNG or JPEG image \(by its first bytes\) \(image 3 of 4: the run stopped there; the 2 images before it ran and are in .*partial\.json\)/);
    const written = DetectReportSchema.parse(JSON.parse(readFileSync(out, 'utf8')));
    expect(DetectReportSchema.parse(JSON.parse(r.out))).toEqual(written);
    expect(written.images.map((i) => i.file.slice(dir.length + 1))).toEqual(['a.png', 'b.jpg']);
    expect(written.error).toEqual({ file: join(dir, 'c.png'), message: expect.stringMatching(/c\.png: not a PNG or JPEG image/) });
    // in the same batch as a good image: that one still ran
    const r2 = await expectBad(['--images', dir, '--batch', '3', '--out', out], /image 3 of 4/);
    expect(r2.out).toBe('');
    expect(DetectReportSchema.parse(JSON.parse(readFileSync(out, 'utf8'))).images).toHaveLength(2);
  });
});
