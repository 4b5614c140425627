/**
 * visionE2e and captureVision on the tiny YOLOv10 / ConvNeXt-V2 fixtures (CPU): the baseline against itself (head
 * outputs and top-k equal, images/s with intervals, graphs emulated); a SiLU that adds 1 fails naming the batch; a
 * candidate class marked not capturable turns the emulated graphs off on both sides with the reason; a capture's
 * cases build their inputs as bench --captures does.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CaptureIndexSchema, OpScope, Rng, casesFromCaptures, markNotGraphCapturable, type Tensor } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { baselineRegistry } from '../index.js';
import { SiLU } from '../layers/activation.js';
import { EmulatedGraphRuntime } from './device-io.js';
import { captureVision } from './vision-capture.js';
import { visionE2e } from './vision-e2e.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');
const tmp = mkdtempSync(join(tmpdir(), 'fk-vision-e2e-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** SiLU plus 1: a wrong candidate. */
class OffSiLU extends SiLU {
  override forward(x: Tensor): Tensor {
    const s = new OpScope();
    const y = s.own(super.forward(x));
    return s.keep([s.op('add', [y, 1])])[0]!;
  }
}

/** A stand-in for a PyTorch worker's SiLU: the same values, marked as a class a CUDA graph cannot record. */
class OutOfProcessSiLU extends SiLU {}
markNotGraphCapturable(OutOfProcessSiLU, 'a PyTorch candidate (simulated)');

describe('visionE2e (CPU)', () => {
  it('YOLOv10 baseline vs itself: head output and top-k equal at each batch size, images/s with intervals (graphs emulated)', () => {
    const graphs = new EmulatedGraphRuntime();
    const r = visionE2e(baselineRegistry(), baselineRegistry(), { dir: join(FIXTURES, 'tiny-yolov10'), backend: cpuBackend(), dtype: 'f32', batchSizes: [1, 2], images: 3, repeats: 3, graphs });
    expect(r.kind).toBe('detections');
    expect(r.headShape[0]).toBe(1);
    expect(r.headShape[1]).toBe(4 + 4); // 4 box values + nc 4
    expect(r.correctness).toMatchObject({ passed: true, maxHeadError: 0, headErrors: [0, 0], topKAgree: 6, topKTotal: 6 });
    expect(r.usedGraphs).toBe(true);
    expect(graphs.captures).toBeGreaterThan(0);
    expect(r.graphs).toBeUndefined();
    expect(r.bySize.map((s) => s.batch)).toEqual([1, 2]);
    for (const s of r.bySize) {
      expect(s.baseline.imagesPerS.n).toBe(3);
      expect(s.candidate.batchMs.n).toBe(3 * Math.ceil(3 / s.batch));
      const { mean, ci95 } = s.speedup.imagesPerS;
      expect(ci95[0]).toBeLessThanOrEqual(mean);
      expect(ci95[1]).toBeGreaterThanOrEqual(mean);
    }
  }, 120_000);

  it('ConvNeXt-V2 baseline vs itself: logits equal, top-5 equal', () => {
    const r = visionE2e(baselineRegistry(), baselineRegistry(), { dir: join(FIXTURES, 'tiny-convnextv2'), backend: cpuBackend(), dtype: 'f32', batchSizes: [2], images: 2, repeats: 2, graphs: false });
    expect(r.kind).toBe('logits');
    expect(r.headShape).toEqual([2, 5]);
    expect(r.correctness).toMatchObject({ passed: true, maxHeadError: 0, topKAgree: 2, topKTotal: 2 });
    expect(r.usedGraphs).toBe(false);
  }, 120_000);

  it('a SiLU that adds 1 fails correctness, naming the batch size and batch', () => {
    const cand = baselineRegistry().child('off-silu');
    cand.override('L1/silu', OffSiLU);
    const r = visionE2e(baselineRegistry(), cand, { dir: join(FIXTURES, 'tiny-yolov10'), backend: cpuBackend(), dtype: 'f32', batchSizes: [2], images: 2, repeats: 1, graphs: false });
    expect(r.correctness.passed).toBe(false);
    expect(r.correctness.reason).toMatch(/^batch size 2, batch 0 \(images 0-1\): head output max \|diff\|/);
    expect(r.correctness.maxHeadError).toBeGreaterThan(1e-3);
  }, 120_000);

  it('a candidate class marked not capturable: graphs off on both sides, and the result says why', () => {
    const graphs = new EmulatedGraphRuntime();
    const cand = baselineRegistry().child('torch-silu');
    cand.override('L1/silu', OutOfProcessSiLU);
    const lines: string[] = [];
    const r = visionE2e(baselineRegistry(), cand, {
      dir: join(FIXTURES, 'tiny-yolov10'), backend: cpuBackend(), dtype: 'f32', batchSizes: [1], images: 1, repeats: 1, graphs,
      candidateSet: [{ taskId: 'L1/silu', cls: OutOfProcessSiLU }], log: (l) => lines.push(l),
    });
    expect(graphs.captures).toBe(0); // not on the baseline's side either
    expect(graphs.replays).toBe(0);
    expect(r.usedGraphs).toBe(false);
    expect(r.graphs).toBe(false);
    expect(r.graphsReason).toBe('L1/silu: a PyTorch candidate (simulated): not capturable');
    expect(r.correctness.passed).toBe(true);
    expect(lines.filter((l) => /CUDA graphs off on both sides/.test(l))).toHaveLength(1);
  }, 120_000);
});

describe('captureVision (CPU)', () => {
  it('records the YOLOv10 tasks of a real run at each batch size, in an index bench --captures takes', () => {
    const out = join(tmp, 'yolo');
    const r = captureVision({ baseline: baselineRegistry(), dir: join(FIXTURES, 'tiny-yolov10'), backend: cpuBackend(), dtype: 'f32', batchSizes: [1, 2], outDir: out, model: 'tiny-yolov10' });
    expect(r).toMatchObject({ images: 3, imageSize: 64 });
    const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(r.path, 'utf8')));
    expect(index.workload).toBe('images:64x64:bs=1,2');
    expect(Object.keys(index.tasks)).toEqual(expect.arrayContaining(['L1/silu', 'L1/conv2d', 'L2/yolov10_conv']));
    // the stem's SiLU at both batch sizes (one batch each)
    const batches = new Set(index.tasks['L1/silu']!.forward.map((f) => f.dims.N));
    expect([...batches].sort()).toEqual([1, 2]);
    const baseline = baselineRegistry();
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry: baseline };
    for (const id of Object.keys(index.tasks)) {
      const task = baseline.task(id)!;
      for (const c of casesFromCaptures(task, [{ index, resolve: (f) => join(out, f), path: r.path }], 3)) {
        const inputs = task.makeInputs(c, ctx, new Rng(1));
        expect(inputs.length, `${id} ${c.name}`).toBe(task.inputs.length);
        for (const t of inputs) t?.dispose();
      }
    }
  }, 120_000);
});
