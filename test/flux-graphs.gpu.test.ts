/**
 * The FLUX transformer step's CUDA graph on a GPU (tag gpu; skipped without one): the tiny FLUX pipeline (seeded random
 * weights, built from its config: the GPU host has the bundle, not the fixture folder) gives the same latents at every
 * step and the same image with graphs on as off, in f32 and bf16, batch 1 and 2; then the per-step latency of the
 * denoising loop with graphs and without at a mid-size transformer (12 heads x 128, 4 double + 8 single blocks, a
 * 512 x 512 image's 1024 latent tokens, 512 T5 tokens, bf16), printed as `[flux-graphs]` lines.
 * Runs with `dist/gpu-host/run-gpu-tests flux-graphs`.
 */
import { CudaBackend, CudaRuntime } from '@fastkernels/backend-cuda';
import { Rng, Tensor, fillNormal_, normalTensor, toHostArray, withContext, type ExecutionContext, type Module } from '@fastkernels/core';
import { FluxPipeline, baselineRegistry, stepIoFor, tinyFluxConfig, tinyFluxPipelineConfig } from '@fastkernels/model-zoo';
import { describe, expect, it } from 'vitest';

const G = { tags: ['gpu'], timeout: 600_000 };
const needGpu = () => {
  if (!(CudaRuntime.probe().deviceCount ?? 0)) throw new Error('this test needs a GPU');
};

/** Norm scales near 1, matrices 1 / sqrt(fan-in), the rest 0.1 (the CPU tests' initialisation, drawn on the device). */
function initWeights(m: Module, rng: Rng): void {
  for (const [name, p] of m.namedParameters()) {
    if (/norm[^.]*\.weight$/.test(name)) fillNormal_(p, rng, 0.1, 1);
    else if (name.endsWith('weight') && p.shape.length === 2) fillNormal_(p, rng, 1 / Math.sqrt(p.shape[1]!));
    else fillNormal_(p, rng, 0.1);
  }
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;

describe('FLUX transformer step in a CUDA graph', () => {
  for (const [dtype, B] of [['f32', 1], ['bf16', 2]] as const) {
    it(`tiny pipeline ${dtype} batch ${B}: graphs on = graphs off at every step and in the image`, G, () => {
      needGpu();
      const backend = new CudaBackend();
      const ctx: ExecutionContext = { backend, device: 0, dtype, registry: baselineRegistry() };
      const cfg = tinyFluxPipelineConfig();
      const pipe = withContext(ctx, () => new FluxPipeline(cfg, 4, 3.5));
      initWeights(pipe, new Rng(3));
      const rng = new Rng(5);
      const ids = (n: number, vocab: number) => Array.from({ length: B * n }, () => rng.int(0, vocab));
      const clipIds = ids(6, cfg.textEncoder.vocabSize);
      const t5Ids = ids(7, cfg.textEncoder2.vocabSize);
      const graphs = stepIoFor(backend).graphs;
      expect(graphs, 'the CUDA backend has graphs').not.toBeNull();
      const run = (g: typeof graphs) =>
        withContext(ctx, () => {
          const clip = Tensor.fromArray(backend, clipIds, [B, 6], 'i64');
          const t5 = Tensor.fromArray(backend, t5Ids, [B, 7], 'i64');
          const noise = normalTensor(backend, [B, cfg.vae.latentChannels, 8, 6], dtype, new Rng(9));
          const steps: Float64Array[] = [];
          const image = pipe.run(clip, t5, noise, { graphs: g, onStep: (_, x) => steps.push(toHostArray(x).data) });
          const out = { steps, image: toHostArray(image).data };
          for (const t of [clip, t5, noise, image]) t.dispose();
          return out;
        });
      const off = run(null);
      const on = run(graphs);
      const again = run(graphs); // replayed, not captured again
      expect(pipe.graphStats).toMatchObject({ captures: 1, replays: 8 });
      for (const r of [on, again]) {
        r.steps.forEach((s, i) => expect([...s], `step ${i}`).toEqual([...off.steps[i]!]));
        expect([...r.image]).toEqual([...off.image]);
      }
      pipe.dispose();
    });
  }

  it('mid-size transformer (bf16, 1024 image + 512 text tokens): per-step latency with graphs vs without', G, () => {
    needGpu();
    const backend = new CudaBackend();
    const ctx: ExecutionContext = { backend, device: 0, dtype: 'bf16', registry: baselineRegistry() };
    const tiny = tinyFluxPipelineConfig();
    const transformer = tinyFluxConfig({ inChannels: 64, outChannels: 64, numLayers: 4, numSingleLayers: 8, numAttentionHeads: 12, attentionHeadDim: 128, jointAttentionDim: 4096, pooledProjectionDim: 768, axesDimsRope: [16, 56, 56] });
    const pipe = withContext(ctx, () => new FluxPipeline({ ...tiny, transformer }, 12, 3.5));
    initWeights(pipe.transformer, new Rng(1));
    const rng = new Rng(2);
    const h = 64;
    const w = 64;
    const packed = normalTensor(backend, [1, (h / 2) * (w / 2), 64], 'bf16', rng);
    const embeds = normalTensor(backend, [1, 512, 4096], 'bf16', rng);
    const pooled = normalTensor(backend, [1, 768], 'bf16', rng);
    const timeRun = (g: ReturnType<typeof stepIoFor>['graphs']) =>
      withContext(ctx, () => {
        const ms: number[] = [];
        backend.synchronize(0);
        let t0 = performance.now();
        const out: Tensor = pipe.denoise(packed, embeds, pooled, h, w, {
          steps: 12,
          graphs: g,
          onStep: () => {
            backend.synchronize(0);
            const now = performance.now();
            ms.push(now - t0);
            t0 = now;
          },
        });
        const latents = toHostArray(out).data;
        out.dispose();
        return { stepMs: ms.slice(2), latents }; // the first two: warm-up (and the capture)
      });
    timeRun(null); // kernels compiled, autotuning settled
    const eager = timeRun(null);
    const graphed = timeRun(stepIoFor(backend).graphs);
    const e = median(eager.stepMs);
    const g = median(graphed.stepMs);
    let maxDiff = 0;
    let maxAbs = 0;
    eager.latents.forEach((v, i) => {
      maxDiff = Math.max(maxDiff, Math.abs(v - graphed.latents[i]!));
      maxAbs = Math.max(maxAbs, Math.abs(v));
    });
    console.log(`[flux-graphs] mid-size step (bf16, S 1024 + 512, D 1536, 4 + 8 blocks): eager ${e.toFixed(2)} ms, graphed ${g.toFixed(2)} ms (${(e / g).toFixed(2)}x); final latents max |diff| ${maxDiff}`);
    // the tiny cases check bit equality; here only that the timed graph computes the same step (bf16 rounding)
    expect(maxDiff).toBeLessThanOrEqual(1e-2 * maxAbs);
    expect(g).toBeLessThan(e * 1.1); // a replay is never meaningfully slower than its eager launches
    for (const t of [packed, embeds, pooled]) t.dispose();
    pipe.dispose();
  });
});
