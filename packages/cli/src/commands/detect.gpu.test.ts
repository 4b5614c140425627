/**
 * detect and classify on CUDA (tag gpu): the tiny fixtures on the vision runner's production path (fused at load,
 * channels-last input, one CUDA graph per batch size, replays after) against the same commands on the CPU (float64
 * inside). YOLOv10: an init-weights checkpoint (BatchNorms calibrated on the CPU), a folder of three PNGs at batch 2
 * (graphs for 2 and for the last 1); f32 detections match the CPU's one by one (class, confidence, box in image
 * pixels), fp16 (production) keeps the confidences within fp16 noise. ConvNeXt-V2: f32 probabilities match. The
 * fixtures' configs travel as JSON imports (the GPU host has no checkout).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encode as encodePng } from 'fast-png';
import { describe, expect, it } from 'vitest';
import convnextConfig from '../../../model-zoo/fixtures/tiny-convnextv2/config.json' with { type: 'json' };
import yoloConfig from '../../../model-zoo/fixtures/tiny-yolov10/config.json' with { type: 'json' };
import type { ClassifyReport, DetectReport } from '../vision/report.js';
import { ClassifyReportSchema, DetectReportSchema } from '../vision/report.js';
import { runClassify } from './classify.js';
import { runDetect } from './detect.js';
import { runInitWeights } from './init-weights.js';

const tmp = mkdtempSync(join(tmpdir(), 'fk-detect-gpu-'));
const quiet = { out: () => {}, err: () => {} };
for (const [name, cfg] of [['tiny-yolov10', yoloConfig], ['tiny-convnextv2', convnextConfig]] as const) {
  mkdirSync(join(tmp, name));
  writeFileSync(join(tmp, name, 'config.json'), JSON.stringify(cfg));
}
const YOLO = join(tmp, 'yolo-ckpt');
let written = false;
/** The calibrated checkpoint, written on first use (not at import: where the tests skip, nothing runs). */
function yoloCheckpoint(): string {
  if (!written) runInitWeights({ config: join(tmp, 'tiny-yolov10', 'config.json'), out: YOLO, seed: 3, dtype: 'f32', backend: 'cpu' }, quiet);
  written = true;
  return YOLO;
}

// gradients with solid blocks, three sizes (letterboxed three ways)
const images = join(tmp, 'images');
mkdirSync(images);
for (const [i, [w, h]] of [[100, 50], [48, 80], [200, 120]].entries()) {
  const data = new Uint8Array(w! * h! * 3);
  for (let y = 0; y < h!; y++) for (let x = 0; x < w!; x++) data.set([(x * 5 + i * 40) % 256, (y * 7) % 256, ((x + y) * 3) % 256], (y * w! + x) * 3);
  for (let y = Math.floor(h! / 4); y < Math.floor(h! / 2); y++) for (let x = Math.floor(w! / 3); x < Math.floor((2 * w!) / 3); x++) data.set([220, 40, 30 + i * 60], (y * w! + x) * 3);
  writeFileSync(join(images, `${i}.png`), encodePng({ width: w!, height: h!, data, channels: 3, depth: 8 }));
}

function detectOn(backend: string, dtype: string): DetectReport {
  let out = '';
  runDetect({ model: yoloCheckpoint(), images, conf: 0, batch: 2, backend, dtype, initSeed: 0, json: true }, { out: (s) => (out += s), err: () => {} });
  return DetectReportSchema.parse(JSON.parse(out));
}

describe('detect / classify on CUDA (graphs per batch size) vs the CPU backend', () => {
  it('YOLOv10 f32: the same detections, one by one, in image pixels; two graphs captured and replayed', { tags: ['gpu'], timeout: 300_000 }, () => {
    const cpu = detectOn('cpu', 'f32');
    const gpu = detectOn('cuda', 'f32');
    expect(gpu.timings).toMatchObject({ graph_captures: 2, graph_replays: 2 });
    gpu.images.forEach((im, n) => {
      const ref = cpu.images[n]!;
      expect([im.width, im.height, im.detections.length]).toEqual([ref.width, ref.height, ref.detections.length]);
      expect(im.detections[0]!.class).toBe(ref.detections[0]!.class);
      for (const d of im.detections) {
        // near-equal scores may swap places: match each detection to the CPU's of its class with the nearest confidence
        const dist = (r: (typeof ref.detections)[number]) => Math.max(...(['x1', 'y1', 'x2', 'y2'] as const).map((k) => Math.abs(r.box[k] - d.box[k])));
        const twin = ref.detections.filter((r) => r.class === d.class).sort((a, b) => Math.abs(a.confidence - d.confidence) - Math.abs(b.confidence - d.confidence))[0];
        expect(twin, `${im.file}: class ${d.class} at ${d.confidence}`).toBeDefined();
        expect(dist(twin!)).toBeLessThan(0.5);
        expect(Math.abs(twin!.confidence - d.confidence)).toBeLessThan(5e-3);
      }
    });
  });

  it('YOLOv10 fp16 (the production dtype): confidences within fp16 noise of the CPU run', { tags: ['gpu'], timeout: 300_000 }, () => {
    const cpu = detectOn('cpu', 'f32');
    const gpu = detectOn('cuda', 'f16');
    const sorted = (ds: { confidence: number }[]) => ds.map((d) => d.confidence).sort((a, b) => b - a);
    gpu.images.forEach((im, n) => {
      const want = sorted(cpu.images[n]!.detections);
      sorted(im.detections).forEach((c, i) => expect(Math.abs(c - want[i]!)).toBeLessThan(3e-2));
    });
  });

  it('ConvNeXt-V2 f32: the same probabilities per class', { tags: ['gpu'], timeout: 300_000 }, () => {
    const run = (backend: string): ClassifyReport => {
      let out = '';
      runClassify({ model: join(tmp, 'tiny-convnextv2'), images, top: 5, batch: 2, backend, dtype: 'f32', initSeed: 0, json: true }, { out: (s) => (out += s), err: () => {} });
      return ClassifyReportSchema.parse(JSON.parse(out));
    };
    const cpu = run('cpu');
    const gpu = run('cuda');
    expect(gpu.timings.graph_captures).toBe(2);
    gpu.images.forEach((im, n) => {
      const want = new Map(cpu.images[n]!.predictions.map((p) => [p.class, p.confidence]));
      for (const p of im.predictions) expect(Math.abs(p.confidence - want.get(p.class)!)).toBeLessThan(2e-3);
    });
  });
});
