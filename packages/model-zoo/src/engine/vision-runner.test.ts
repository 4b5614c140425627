/**
 * The vision runner on the CPU: YOLOv10 (tiny fixture, random weights calibrated) through the emulated graph path —
 * fused at load, one capture per batch size, replays after — gives the unfused model's detect() on each image, in
 * channels-last and contiguous inputs alike; ConvNeXt-V2's logits are its forward's. Preprocessing: ultralytics'
 * LetterBox geometry and scale_boxes on hand-computed values, HF's resize / crop / normalise.
 */
import { join } from 'node:path';
import { Rng, Tensor, UserError, withContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { baselineRegistry } from '../index.js';
import { loadVisionModel } from '../models/load-model.js';
import { EmulatedGraphRuntime } from './device-io.js';
import { imageProcessorResize, letterbox, pyRound, resizePil, scaleBoxes, type RgbImage } from './vision-preprocess.js';
import { VisionRunner, topK } from './vision-runner.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');
const noise = (n: number, seed: number) => Float32Array.from(new Rng(seed).fillUniform(n, 0, 1));

describe('VisionRunner', () => {
  it("YOLOv10: fused, graph per batch size, replays = the unfused model's detect() per image, channels-last or not", () => {
    const registry = baselineRegistry();
    const ref = loadVisionModel(join(FIXTURES, 'tiny-yolov10'), { backend: cpuBackend(), registry, dtype: 'f32' });
    const S = ref.model.imageSize;
    const images = [1, 2, 3].map((s) => noise(3 * S * S, s));
    const want = images.map((im) =>
      withContext(ref.ctx, () => {
        const x = Tensor.fromArray(ref.ctx.backend, im, [1, 3, S, S], 'f32');
        const d = ref.model.detect!(x);
        const r = { boxes: d.boxes.toFloat64Array(), scores: d.scores.toFloat64Array(), classes: [...d.classes.toFloat64Array()] };
        for (const t of [x, d.boxes, d.scores, d.classes]) t.dispose();
        return r;
      }),
    );
    for (const channelsLast of [true, false]) {
      const loaded = loadVisionModel(join(FIXTURES, 'tiny-yolov10'), { backend: cpuBackend(), registry, dtype: 'f32' });
      const graphs = new EmulatedGraphRuntime();
      const runner = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: 2, graphs, channelsLast });
      expect(loaded.model.namedParameters().some(([k]) => k.includes('.bn.'))).toBe(false); // fused at load
      // channels-last: every k x k conv weight laid out channels-last once (1x1 and depthwise filters are both layouts)
      const filters = loaded.model.namedParameters().filter(([, t]) => t.rank === 4 && t.shape[1]! > 1 && t.shape[2]! > 1);
      expect(filters.length).toBeGreaterThan(0);
      for (const [k, t] of filters) expect(t.isContiguous(), k).toBe(!channelsLast);
      const first = runner.run(images);
      const second = runner.run(images);
      expect(graphs.captures).toBe(2); // batch 2 and the last batch of 1
      expect(runner.stats).toMatchObject({ images: 6, forwards: 4, graphReplays: 4, eagerForwards: 0, captures: 2 });
      for (const results of [first, second]) {
        results.forEach((r, n) => {
          if (r.kind !== 'detections') throw new Error('expected detections');
          expect([...r.classes]).toEqual(want[n]!.classes);
          r.scores.forEach((v, i) => expect(v).toBeCloseTo(want[n]!.scores[i]!, 5));
          r.boxes.forEach((v, i) => expect(Math.abs(v - want[n]!.boxes[i]!)).toBeLessThan(1e-3 * S));
        });
      }
      runner.dispose();
      loaded.model.dispose();
    }
    ref.model.dispose();
  });

  it('forwardInPlace: the device forward alone (captured on first use, replayed after), no images moved', () => {
    const loaded = loadVisionModel(join(FIXTURES, 'tiny-yolov10'), { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32' });
    const graphs = new EmulatedGraphRuntime();
    const runner = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: 2, graphs });
    runner.forwardInPlace(2);
    runner.forwardInPlace(2);
    expect(graphs.captures).toBe(1);
    expect(runner.stats).toMatchObject({ images: 0, forwards: 0, graphReplays: 2, captures: 1 });
    expect(() => runner.forwardInPlace(3)).toThrow(/batch must be an integer in \[1, 2\], got 3/);
    runner.dispose();
    loaded.model.dispose();
  });

  describe('graph pool sizing', () => {
    /** Emulated graphs whose captures need `required` pool bytes; measurePoolBytes reports `measured` (when given). */
    class SizedGraphs extends EmulatedGraphRuntime {
      readonly pools: number[] = [];
      destroyed = 0;
      measurePoolBytes?: (fn: () => void) => number;
      constructor(readonly required: number, measured?: number) {
        super();
        if (measured !== undefined) this.measurePoolBytes = (fn) => (fn(), measured);
      }
      override createPool(bytes: number): unknown {
        this.pools.push(bytes);
        return super.createPool(bytes);
      }
      override capture(fn: () => void, pool?: unknown) {
        const bytes = this.poolBytes(pool);
        if (bytes < this.required) throw new Error(`graph pool exhausted during capture: 2048000 bytes requested, 4096 of ${bytes} left; reserve a larger pool`);
        return super.capture(fn);
      }
      override destroyPool(): void {
        this.destroyed++;
      }
    }
    const MiB = 2 ** 20;
    // the tiny ConvNeXt-V2: a forward in milliseconds on the CPU (sizing is all these tests look at)
    const load = () => loadVisionModel(join(FIXTURES, 'tiny-convnextv2'), { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32' });

    it('the pool is what the warm-up measured, scaled to maxBatch with 25% headroom: the capture fits the first time', () => {
      const loaded = load();
      const graphs = new SizedGraphs(350 * MiB, 300 * MiB);
      const runner = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: 2, graphs });
      runner.forwardInPlace(2);
      expect(graphs.pools).toEqual([375 * MiB]);
      expect(graphs.captures).toBe(1);
      runner.dispose();
      loaded.model.dispose();
    });

    it('a pool a capture outgrows is doubled and every graph captured again on its next use', () => {
      const loaded = load();
      const graphs = new SizedGraphs(300 * MiB); // no measurement: twice the live peak (0 here), at least 256 MiB
      const runner = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: 2, graphs });
      runner.forwardInPlace(2);
      expect(graphs.pools).toEqual([256 * MiB, 512 * MiB]);
      expect(graphs.destroyed).toBe(1);
      expect(runner.stats.captures).toBe(1);
      runner.forwardInPlace(1); // fits the larger pool
      runner.forwardInPlace(2);
      expect(graphs.pools).toHaveLength(2);
      expect(runner.stats).toMatchObject({ captures: 2, graphReplays: 3 });
      runner.dispose();
      loaded.model.dispose();
    });

    it('a pool still too small, or one the caller sized, ends in a UserError saying what to change', () => {
      const loaded = load();
      const grown = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: 2, graphs: new SizedGraphs(4096 * MiB) });
      const e1 = (() => {
        try {
          grown.forwardInPlace(2);
        } catch (e) {
          return e as UserError;
        }
      })();
      expect(e1).toBeInstanceOf(UserError);
      expect(e1!.message).toMatch(/batch of 2 needs more graph pool than the 1024 MiB reserved after 2 doublings/);
      expect(e1!.details.fix).toMatch(/smaller batch, or without CUDA graphs/);
      grown.dispose();
      const fixed = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: 2, graphs: new SizedGraphs(300 * MiB), graphPoolBytes: 100 * MiB });
      expect(() => fixed.forwardInPlace(2)).toThrow(/needs more graph pool than the 100 MiB given \(graphPoolBytes\)/);
      fixed.dispose();
      loaded.model.dispose();
    });
  });

  it("ConvNeXt-V2: eager on the CPU, the logits are the model's forward; topK is softmax's best", () => {
    const loaded = loadVisionModel(join(FIXTURES, 'tiny-convnextv2'), { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32' });
    const S = loaded.model.imageSize;
    const images = [4, 5, 6].map((s) => noise(3 * S * S, s));
    const x = Tensor.fromArray(loaded.ctx.backend, Float32Array.from(images.flatMap((im) => [...im])), [3, 3, S, S], 'f32');
    const want = withContext(loaded.ctx, () => loaded.model.forward(x)).toFloat64Array();
    const runner = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: 8 });
    expect(runner.usesGraphs).toBe(false);
    expect(runner.channelsLast).toBe(false);
    const got = runner.run(images);
    expect(runner.stats).toMatchObject({ forwards: 1, eagerForwards: 1, graphReplays: 0 });
    got.forEach((r, n) => {
      if (r.kind !== 'logits') throw new Error('expected logits');
      r.logits.forEach((v, j) => expect(v).toBeCloseTo(want[n * 5 + j]!, 9));
    });
    const top = topK(Float64Array.from([1, 3, 2, 3]), 3);
    expect(top.map((t) => t.index)).toEqual([1, 3, 2]);
    const z = Math.exp(1) + 2 * Math.exp(3) + Math.exp(2);
    expect(top[0]!.score).toBeCloseTo(Math.exp(3) / z, 12);
    expect(() => runner.run([new Float32Array(5)])).toThrow(/image 0 has 5 values, expected 3 x 32 x 32/);
    runner.dispose();
    loaded.model.dispose();
  });
});

const solid = (width: number, height: number, rgb: [number, number, number]): RgbImage => {
  const data = new Uint8Array(width * height * 3);
  for (let i = 0; i < width * height; i++) data.set(rgb, i * 3);
  return { width, height, data };
};

describe('preprocessing', () => {
  it("Python's round: halves to even", () => {
    expect([0.5, 1.5, 2.5, -0.5, 2.4, 2.6].map((v) => pyRound(v) + 0)).toEqual([0, 2, 2, 0, 2, 3]);
  });

  it('LetterBox: 100 x 50 into 64 -> 64 x 32 centred, 16 rows of 114 gray above and below; scale_boxes inverts it', () => {
    const img = solid(100, 50, [255, 0, 51]);
    const p = letterbox(img, 64);
    expect(p.letterbox).toEqual({ gain: 0.64, padX: 0, padY: 16, width: 100, height: 50 });
    const at = (c: number, y: number, x: number) => p.chw[c * 64 * 64 + y * 64 + x]!;
    expect(at(0, 15, 10)).toBeCloseTo(114 / 255, 7);
    expect(at(0, 16, 10)).toBeCloseTo(1, 7);
    expect(at(2, 47, 63)).toBeCloseTo(51 / 255, 7);
    expect(at(1, 48, 0)).toBeCloseTo(114 / 255, 7);
    // a box in input pixels back to the image: (x - 0) / 0.64, (y - 16) / 0.64, clipped to 100 x 50
    const b = scaleBoxes(Float64Array.from([6.4, 16, 32, 80, -5, 20, 70, 40]), 64, p.letterbox!);
    expect([...b].map((v) => +v.toFixed(6))).toEqual([10, 0, 50, 50, 0, 6.25, 100, 37.5]);
    // odd padding: 50 x 47 into 64 -> 64 x 60 (round(60.16)), dh = 2 -> top round(1.9) = 2
    expect(letterbox(solid(50, 47, [0, 0, 0]), 64).letterbox).toMatchObject({ padX: 0, padY: 2 });
  });

  it('HF resize: shortest edge to S / crop_pct, centre crop, normalised; PIL bicubic keeps a flat image flat', () => {
    const flat = resizePil(solid(40, 30, [200, 100, 50]), 17, 9, 'bicubic');
    expect(new Set(flat.data).size).toBe(3);
    const mean = [0.5, 0.5, 0.5];
    const std = [0.25, 0.5, 1];
    const p = imageProcessorResize(solid(80, 40, [255, 0, 127]), 32, { kind: 'resize', cropPct: 0.875, resample: 'bicubic', mean, std });
    expect(p.chw.length).toBe(3 * 32 * 32);
    expect(p.chw[0]).toBeCloseTo((1 - 0.5) / 0.25, 6);
    expect(p.chw[32 * 32]).toBeCloseTo(-1, 6);
    expect(p.chw[2 * 32 * 32 + 5]).toBeCloseTo(127 / 255 - 0.5, 6);
    expect(p.letterbox).toBeNull();
  });
});
