/**
 * The FLUX transformer step as a CUDA graph (issue 33): one static set of buffers per step shape (batch, image tokens,
 * text tokens, latent grid, dtype) — the latents, the timestep, the guidance, the T5 prompt states, the pooled CLIP
 * vector, the RoPE tables (made once, outside the graph) and the velocity out — and one graph over
 * FluxTransformer2DModel.forwardWithRotary reading them. The first step of a shape runs the body eagerly (kernels
 * compiled, lazy constants such as the timestep frequencies uploaded), then captures it; every step after replays it.
 * Between steps only device-to-device copies feed it: the next latents, the step's row of the timesteps computed for
 * the whole schedule before the loop. The Euler step and the VAE decode stay eager (a few elementwise kernels; the
 * decode runs once an image). On the CPU the runtime is the emulated one (tests) or none (eager).
 */
import { DTYPE_INFO, Tensor, type DType } from '@fastkernels/core';
import type { CapturedGraph, GraphRuntime, StepIo } from '../../../engine/device-io.js';
import type { FluxTransformer2DModel } from '../L4/flux_transformer.js';
import { latentImageIds } from './latents.js';

/** The step's static inputs and output for one shape. */
interface StepBuffers {
  readonly latents: Tensor;
  readonly timestep: Tensor;
  readonly guidance: Tensor | null;
  readonly promptEmbeds: Tensor;
  readonly pooled: Tensor;
  readonly cos: Tensor;
  readonly sin: Tensor;
  velocity: Tensor | null;
  graph: CapturedGraph | null;
}

export interface FluxGraphStats {
  captures: number;
  replays: number;
  captureMs: number;
}

/** What one denoising run binds: the static buffers of its shape, filled with this run's conditioning. */
export interface BoundStep {
  /** The static latents [B, S, 4C]: the step reads them; the caller writes the next latents back into them. */
  readonly latents: Tensor;
  /** Copy row `step` of the schedule's timesteps [steps, B] into the static timestep, then run the step; the velocity (static, borrowed). */
  run(timesteps: Tensor, step: number): Tensor;
}

export class FluxTransformerGraphs {
  readonly stats: FluxGraphStats = { captures: 0, replays: 0, captureMs: 0 };
  private readonly shapes = new Map<string, StepBuffers>();
  private pool: unknown = null;

  constructor(
    private readonly transformer: FluxTransformer2DModel,
    private readonly runtime: GraphRuntime,
    private readonly io: StepIo,
    /** Graph pool bytes (default: twice the first warm-up's activation peak where the backend tells it, else 256 MiB). */
    private readonly poolBytes?: number,
  ) {}

  /**
   * The static buffers of this run's shape (made on first use, with the RoPE tables of an h x w latent grid), the run's
   * latents, prompt states, pooled vector and guidance copied in on the device.
   */
  bind(packed: Tensor, promptEmbeds: Tensor, pooled: Tensor, guidance: Tensor | null, h: number, w: number): BoundStep {
    const [B, S] = packed.shape as [number, number];
    const St = promptEmbeds.shape[1]!;
    const key = `${B}x${S}x${St}x${h}x${w}x${packed.dtype}x${promptEmbeds.dtype}x${guidance ? 'g' : '-'}`;
    let buf = this.shapes.get(key);
    if (!buf) {
      buf = this.makeBuffers(packed, promptEmbeds, pooled, guidance, h, w);
      this.shapes.set(key, buf);
    }
    buf.latents.copy_(packed);
    buf.promptEmbeds.copy_(promptEmbeds);
    buf.pooled.copy_(pooled);
    if (guidance) buf.guidance!.copy_(guidance);
    const b = buf;
    return {
      latents: b.latents,
      run: (timesteps, step) => {
        const row = timesteps.narrow(0, step, 1);
        const flat = row.view(B);
        b.timestep.copy_(flat);
        flat.dispose();
        row.dispose();
        if (!b.graph) this.capture(b);
        b.graph!.replay();
        this.stats.replays++;
        return b.velocity!;
      },
    };
  }

  private makeBuffers(packed: Tensor, promptEmbeds: Tensor, pooled: Tensor, guidance: Tensor | null, h: number, w: number): StepBuffers {
    const like = (t: Tensor, dtype: DType = t.dtype) => Tensor.empty(t.backend, t.shape, dtype, { device: t.device });
    const [B] = packed.shape as [number];
    const St = promptEmbeds.shape[1]!;
    const imgIds = latentImageIds(packed, h, w, packed.dtype);
    const txtIds = Tensor.zeros(packed.backend, [St, 3], packed.dtype, { device: packed.device });
    try {
      const [cos, sin] = this.transformer.rotary(imgIds, txtIds);
      return {
        latents: like(packed),
        timestep: Tensor.empty(packed.backend, [B], packed.dtype, { device: packed.device }),
        guidance: guidance ? like(guidance) : null,
        promptEmbeds: like(promptEmbeds),
        pooled: like(pooled),
        cos,
        sin,
        velocity: null,
        graph: null,
      };
    } finally {
      imgIds.dispose();
      txtIds.dispose();
    }
  }

  /** The step over the static buffers, its velocity copied into the static output (made on the warm-up run). */
  private body(b: StepBuffers): void {
    const v = this.transformer.forwardWithRotary(b.latents, b.promptEmbeds, b.pooled, b.timestep, b.cos, b.sin, b.guidance);
    try {
      b.velocity ??= Tensor.empty(v.backend, v.shape, v.dtype, { device: v.device });
      b.velocity.copy_(v);
    } finally {
      v.dispose();
    }
  }

  /** Warm up eagerly (outputs made, kernels compiled, lazy constants uploaded), then capture into the shared pool. */
  private capture(b: StepBuffers): void {
    const t0 = performance.now();
    const mem = this.io.memoryInfo();
    mem?.resetPeak();
    const before = mem?.allocatedBytes ?? 0;
    this.body(b);
    b.latents.backend.synchronize(b.latents.device);
    if (!this.pool) {
      const peak = mem ? Math.max(0, mem.peakBytes - before) : 0;
      this.pool = this.runtime.createPool(this.poolBytes ?? Math.max(2 * peak, 256 * 2 ** 20));
    }
    b.graph = this.runtime.capture(() => this.body(b), this.pool);
    this.stats.captures++;
    this.stats.captureMs += performance.now() - t0;
  }

  /** Bytes of the static buffers held (all shapes). */
  get staticBytes(): number {
    let n = 0;
    for (const b of this.shapes.values()) for (const t of tensorsOf(b)) n += t.numel * DTYPE_INFO[t.dtype].itemsize;
    return n;
  }

  /** Release every graph, the pool and the static buffers. */
  dispose(): void {
    for (const b of this.shapes.values()) {
      b.graph?.destroy();
      for (const t of tensorsOf(b)) t.dispose();
    }
    this.shapes.clear();
    if (this.pool) this.runtime.destroyPool(this.pool);
    this.pool = null;
  }
}

function tensorsOf(b: StepBuffers): Tensor[] {
  return [b.latents, b.timestep, b.promptEmbeds, b.pooled, b.cos, b.sin, ...(b.guidance ? [b.guidance] : []), ...(b.velocity ? [b.velocity] : [])];
}
