/**
 * The FLUX transformer step through the graph path on the CPU (EmulatedGraphRuntime: capture runs the body, each replay
 * runs it again over the same static buffers): every step's latents and the image equal the eager loop's bit for bit
 * (f32 and bf16, batch 1 and 2), one capture per shape and a replay per step, a later run of the shape replaying without
 * a new capture; the graphed latents against the float64 pipeline as the eager ones are; generateImage on the fixture
 * folder with graphs on = off. The host-transfer check under capture is test/flux-graph-coverage.test.ts.
 */
import { join } from 'node:path';
import { Rng, toHostArray, withContext, type ExecutionContext, type HostArray, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { fromInts, randn } from '../../../common/inputs.js';
import { EmulatedGraphRuntime } from '../../../engine/device-io.js';
import { baselineRegistry } from '../../../index.js';
import { loadPipelineModel } from '../../../models/load-pipeline.js';
import { initFamilyParameters } from '../cases.js';
import { FluxPipeline, tinyFluxPipelineConfig } from '../L4/flux.js';
import { fluxPipelineReference } from './reference.js';

const FIXTURE = join(import.meta.dirname, '../../../../fixtures/tiny-flux');
const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => Array.from(a).reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);

/** A seeded tiny pipeline and one prompt / noise of batch B. */
function setup(dtype: 'f32' | 'bf16', B: number, seed: number) {
  const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype, registry: baselineRegistry() };
  const cfg = tinyFluxPipelineConfig();
  const pipe = withContext(ctx, () => new FluxPipeline(cfg, 3, 3.5));
  const rng = new Rng(seed);
  initFamilyParameters(pipe, rng);
  const inputs = (s: number) => {
    const r = new Rng(s);
    return withContext(ctx, () => [
      fromInts(ctx, Array.from({ length: B * 6 }, () => r.int(0, cfg.textEncoder.vocabSize)), [B, 6]),
      fromInts(ctx, Array.from({ length: B * 7 }, () => r.int(0, cfg.textEncoder2.vocabSize)), [B, 7]),
      randn(ctx, r, [B, cfg.vae.latentChannels, 4, 6], dtype),
    ]) as [Tensor, Tensor, Tensor];
  };
  return { ctx, cfg, pipe, inputs };
}

/** The run's per-step latents (host copies) and its image. */
function runPipe(ctx: ExecutionContext, pipe: FluxPipeline, [clip, t5, noise]: [Tensor, Tensor, Tensor], graphs: EmulatedGraphRuntime | null) {
  return withContext(ctx, () => {
    const steps: HostArray[] = [];
    const image = pipe.run(clip, t5, noise, { graphs, onStep: (_, x) => steps.push(toHostArray(x)) });
    const out = { steps, image: toHostArray(image) };
    image.dispose();
    return out;
  });
}

describe('the FLUX transformer step in a graph (emulated on the CPU)', () => {
  for (const [dtype, B] of [['f32', 1], ['bf16', 2]] as const) {
    it(`${dtype} batch ${B}: every step's latents and the image equal the eager loop's bit for bit; one capture, a replay per step`, () => {
      const { ctx, pipe, inputs } = setup(dtype, B, 11);
      const graphs = new EmulatedGraphRuntime();
      for (const seed of [1, 2]) {
        const x = inputs(seed);
        const eager = runPipe(ctx, pipe, x, null);
        const graphed = runPipe(ctx, pipe, x, graphs);
        expect(graphed.steps.length).toBe(3);
        graphed.steps.forEach((s, i) => expect([...s.data], `step ${i}`).toEqual([...eager.steps[i]!.data]));
        expect([...graphed.image.data]).toEqual([...eager.image.data]);
        for (const t of x) t.dispose();
      }
      // the second run (another prompt and noise, same shape) replayed the first run's graph
      expect(graphs.captures).toBe(1);
      expect(pipe.graphStats).toMatchObject({ captures: 1, replays: 6 });
      pipe.dispose();
    });
  }

  it('a new shape captures its own graph; the graphed latents match the float64 pipeline at every step', () => {
    const { ctx, cfg, pipe, inputs } = setup('f32', 1, 5);
    const graphs = new EmulatedGraphRuntime();
    const x = inputs(3);
    const got = runPipe(ctx, pipe, x, graphs);
    const params = new Map(pipe.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
    const refSteps: HostArray[] = [];
    const ref = fluxPipelineReference(toHostArray(x[0]), toHostArray(x[1]), toHostArray(x[2]), params, cfg, 3, 3.5, (_, s) => refSteps.push(s));
    got.steps.forEach((s, i) => expect(maxDiff(s.data, refSteps[i]!.data), `step ${i}`).toBeLessThan(1e-4));
    expect(maxDiff(got.image.data, ref.data)).toBeLessThan(1e-4);
    // another latent grid (8 x 4): a second capture beside the first
    const other = withContext(ctx, () => randn(ctx, new Rng(9), [1, cfg.vae.latentChannels, 8, 4], 'f32'));
    const eager = runPipe(ctx, pipe, [x[0], x[1], other], null);
    const graphed = runPipe(ctx, pipe, [x[0], x[1], other], graphs);
    expect([...graphed.image.data]).toEqual([...eager.image.data]);
    expect(graphs.captures).toBe(2);
    for (const t of [...x, other]) t.dispose();
    pipe.dispose();
  });

  it('generateImage on the tiny-flux folder: graphs on (emulated) = graphs off, byte for byte', () => {
    const loaded = loadPipelineModel(FIXTURE, { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32' });
    try {
      const req = { prompt: 'a red cube', height: 16, width: 16, steps: 3, seed: 4, maxSequenceLength: 10 };
      const off = loaded.model.generateImage({ ...req, graphs: false });
      const graphs = new EmulatedGraphRuntime();
      const on = loaded.model.generateImage({ ...req, graphs });
      expect(graphs.captures).toBe(1);
      expect(graphs.replays).toBe(3);
      expect(on.timings.stepMs.length).toBe(3);
      expect(Buffer.from(on.images[0]!.rgb).equals(Buffer.from(off.images[0]!.rgb))).toBe(true);
      // the CPU backend has no graphs: the default is the eager loop
      const plain = loaded.model.generateImage(req);
      expect(graphs.captures).toBe(1);
      expect(Buffer.from(plain.images[0]!.rgb).equals(Buffer.from(off.images[0]!.rgb))).toBe(true);
    } finally {
      loaded.model.dispose();
    }
  });
});
