/**
 * pipelineE2e on the tiny-flux folder (CPU): baseline against itself (every step's latents equal, images equal,
 * PSNR infinite, speedup intervals around 1), and against a candidate registry whose FLUX FeedForward adds 1 (the latents
 * drift past the f32 tolerance at a named step; the report says which); the interval helpers on hand values.
 */
import { join } from 'node:path';
import { OpScope, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { baselineRegistry } from '../index.js';
import { FeedForward } from '../families/vision-video-audio/L2/flux_feedforward.js';
import { EmulatedGraphRuntime } from './device-io.js';
import { estimate, pipelineE2e, psnr8, ratioEstimate } from './pipeline-e2e.js';

const FIXTURE = join(import.meta.dirname, '../../fixtures/tiny-flux');
const requests = [
  { prompt: 'a red cube', height: 16, width: 16, steps: 3, seed: 1, maxSequenceLength: 10 },
  { prompt: 'a blue sphere', height: 16, width: 16, steps: 3, seed: 2, maxSequenceLength: 10 },
];

/** FLUX's FeedForward plus 1: a wrong candidate. */
class OffFeedForward extends FeedForward {
  override forward(x: Tensor): Tensor {
    const s = new OpScope();
    const g = s.own(super.forward(x));
    return s.keep([s.op('add', [g, 1])])[0]!;
  }
}

describe('pipelineE2e (tiny FLUX, CPU)', () => {
  it('baseline vs itself: latents equal at every step, images equal, speedups around 1 (graphs emulated)', () => {
    const r = pipelineE2e(baselineRegistry(), baselineRegistry(), { dir: FIXTURE, backend: cpuBackend(), dtype: 'f32', requests, repeats: 3, graphs: new EmulatedGraphRuntime() });
    expect(r.correctness).toMatchObject({ passed: true, maxStepError: 0, psnr: [Infinity, Infinity] });
    expect(r.correctness.stepErrors.map((s) => s.length)).toEqual([3, 3]);
    expect(r.baseline.stepMs.n).toBe(3 * 2 * 3);
    expect(r.baseline.imagesPerS.n).toBe(3);
    const [lo, hi] = r.speedup.imagesPerS.ci95;
    expect(lo).toBeLessThanOrEqual(r.speedup.imagesPerS.mean);
    expect(hi).toBeGreaterThanOrEqual(r.speedup.imagesPerS.mean);
    expect(r.speedup.stepLatency.mean).toBeGreaterThan(0.2);
    expect(r.speedup.stepLatency.mean).toBeLessThan(5);
  }, 120_000);

  it('a wrong FeedForward candidate fails at a named step', () => {
    const cand = baselineRegistry().child('off-ff');
    cand.override('L2/flux_feedforward', OffFeedForward);
    const r = pipelineE2e(baselineRegistry(), cand, { dir: FIXTURE, backend: cpuBackend(), dtype: 'f32', requests: requests.slice(0, 1), repeats: 1, graphs: false });
    expect(r.correctness.passed).toBe(false);
    expect(r.correctness.reason).toMatch(/^request 0 step \d: latents max \|diff\|/);
    expect(r.correctness.maxStepError).toBeGreaterThan(1e-3);
  }, 120_000);

  it('intervals and PSNR on hand values', () => {
    expect(estimate([1, 2, 3])).toMatchObject({ mean: 2, n: 3 });
    expect(estimate([1, 2, 3]).ci95[0]).toBeCloseTo(2 - 1.96 / Math.sqrt(3), 12);
    const r = ratioEstimate([2, 2, 2], [1, 1, 1]);
    expect(r).toMatchObject({ mean: 2, ci95: [2, 2] });
    expect(psnr8(new Uint8Array([0, 0]), new Uint8Array([0, 0]))).toBe(Infinity);
    expect(psnr8(new Uint8Array([0, 0]), new Uint8Array([255, 255]))).toBe(0);
  });
});
