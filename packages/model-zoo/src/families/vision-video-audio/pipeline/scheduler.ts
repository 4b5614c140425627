/**
 * diffusers' FlowMatchEulerDiscreteScheduler as FluxPipeline drives it: sigmas given by the pipeline
 * (linspace(1, 1 / steps, steps)), shifted by exp(mu) when use_dynamic_shifting (mu from calculate_shift over the
 * image's token count), else by the static `shift`; timesteps = sigmas * num_train_timesteps; a trailing sigma 0; one
 * Euler step x + (sigma_next - sigma) * v per call. The schedule is host math rounded to float32 where diffusers holds
 * float32 (numpy float32 arrays, then torch float32), so the values match diffusers' bit for bit.
 */
import { F, OpScope, UserError, type Tensor } from '@fastkernels/core';
import { z } from 'zod';
import { check, parseWith } from '../../../models/config-parse.js';

const f32 = Math.fround;

export interface FlowMatchSchedulerConfig {
  readonly numTrainTimesteps: number;
  /** The static shift (used when useDynamicShifting is false). */
  readonly shift: number;
  readonly useDynamicShifting: boolean;
  readonly baseShift: number;
  readonly maxShift: number;
  readonly baseImageSeqLen: number;
  readonly maxImageSeqLen: number;
  readonly timeShiftType: 'exponential' | 'linear';
  readonly shiftTerminal: number | null;
  readonly invertSigmas: boolean;
}

const SchedulerSchema = z.looseObject({
  _class_name: z.string().nullish(),
  num_train_timesteps: z.number().int().positive().default(1000),
  shift: z.number().positive().default(1),
  use_dynamic_shifting: z.boolean().default(false),
  base_shift: z.number().nullish(),
  max_shift: z.number().nullish(),
  base_image_seq_len: z.number().int().positive().nullish(),
  max_image_seq_len: z.number().int().positive().nullish(),
  time_shift_type: z.enum(['exponential', 'linear']).default('exponential'),
  shift_terminal: z.number().nullish(),
  invert_sigmas: z.boolean().default(false),
  use_karras_sigmas: z.boolean().nullish(),
  use_exponential_sigmas: z.boolean().nullish(),
  use_beta_sigmas: z.boolean().nullish(),
  stochastic_sampling: z.boolean().nullish(),
});

/** Parse scheduler/scheduler_config.json; a UserError naming the file and the field when one is wrong or unsupported. */
export function parseSchedulerConfig(raw: unknown, file = 'scheduler/scheduler_config.json'): FlowMatchSchedulerConfig {
  const c = parseWith(SchedulerSchema, raw, file);
  check(!c._class_name || c._class_name === 'FlowMatchEulerDiscreteScheduler', file, '_class_name', `_class_name '${c._class_name}' is not FlowMatchEulerDiscreteScheduler (the only scheduler the flux pipeline runs)`);
  for (const k of ['use_karras_sigmas', 'use_exponential_sigmas', 'use_beta_sigmas', 'stochastic_sampling'] as const) check(!c[k], file, k, `${k} true is not supported (FLUX.1 leaves it false)`);
  return {
    numTrainTimesteps: c.num_train_timesteps,
    shift: c.shift,
    useDynamicShifting: c.use_dynamic_shifting,
    // FluxPipeline reads these with these defaults (scheduler.config.get(...)).
    baseShift: c.base_shift ?? 0.5,
    maxShift: c.max_shift ?? 1.15,
    baseImageSeqLen: c.base_image_seq_len ?? 256,
    maxImageSeqLen: c.max_image_seq_len ?? 4096,
    timeShiftType: c.time_shift_type,
    shiftTerminal: c.shift_terminal ?? null,
    invertSigmas: c.invert_sigmas,
  };
}

/** black-forest-labs/FLUX.1-dev scheduler/scheduler_config.json. */
export const FLUX1_DEV_SCHEDULER_RAW = {
  _class_name: 'FlowMatchEulerDiscreteScheduler',
  base_image_seq_len: 256,
  base_shift: 0.5,
  max_image_seq_len: 4096,
  max_shift: 1.15,
  num_train_timesteps: 1000,
  shift: 3.0,
  use_dynamic_shifting: true,
} as const;

/** FluxPipeline's calculate_shift: mu linear in the image's token count, base_shift at base_seq_len, max_shift at max_seq_len. */
export function calculateShift(imageSeqLen: number, baseSeqLen = 256, maxSeqLen = 4096, baseShift = 0.5, maxShift = 1.15): number {
  const m = (maxShift - baseShift) / (maxSeqLen - baseSeqLen);
  const b = baseShift - m * baseSeqLen;
  return imageSeqLen * m + b;
}

/** FluxPipeline's default sigmas: numpy linspace(1.0, 1 / steps, steps) (float64). */
export function fluxDefaultSigmas(steps: number): number[] {
  if (!Number.isInteger(steps) || steps < 1) throw new UserError(`the number of steps must be a positive integer, got ${steps}`, { field: '--steps' });
  const end = 1 / steps;
  // numpy's linspace: i * step + start with step = (stop - start) / (num - 1), the last value exactly `stop`
  const step = (end - 1) / (steps - 1);
  return Array.from({ length: steps }, (_, i) => (i === 0 ? 1 : i === steps - 1 ? end : i * step + 1));
}

export class FlowMatchEulerDiscreteScheduler {
  /** sigmas * num_train_timesteps, float32, one per step. */
  timesteps: Float32Array = new Float32Array(0);
  /** The shifted sigmas, float32, with the trailing 0 (steps + 1 values). */
  sigmas: Float32Array = new Float32Array(0);
  private stepIndex = 0;

  constructor(readonly config: FlowMatchSchedulerConfig) {}

  get numInferenceSteps(): number {
    return this.timesteps.length;
  }

  /** diffusers' time_shift on one float32 sigma, each operation rounded to float32 as numpy does on a float32 array. */
  private timeShift(mu: number, t: number): number {
    const inner = f32(f32(1 / t) - 1);
    if (this.config.timeShiftType === 'exponential') {
      const e = f32(Math.exp(mu));
      return f32(e / f32(e + inner));
    }
    return f32(mu / f32(mu + inner));
  }

  /** set_timesteps(sigmas=..., mu=...): the schedule for these sigmas (mu required when use_dynamic_shifting). */
  setTimesteps(sigmas: readonly number[], mu: number | null = null): void {
    const c = this.config;
    if (c.useDynamicShifting && mu === null) throw new Error('FlowMatchEulerDiscreteScheduler: mu is required when use_dynamic_shifting is true');
    let s = sigmas.map(f32);
    if (c.useDynamicShifting) s = s.map((t) => this.timeShift(mu!, t));
    else s = s.map((t) => f32(f32(c.shift * t) / f32(1 + f32((c.shift - 1) * t))));
    if (c.shiftTerminal !== null) {
      const scale = f32(f32(1 - s[s.length - 1]!) / f32(1 - c.shiftTerminal));
      s = s.map((t) => f32(1 - f32(f32(1 - t) / scale)));
    }
    if (c.invertSigmas) s = s.map((t) => f32(1 - t));
    this.timesteps = Float32Array.from(s, (t) => f32(t * c.numTrainTimesteps));
    this.sigmas = Float32Array.from([...s, c.invertSigmas ? 1 : 0]);
    this.stepIndex = 0;
  }

  /**
   * One Euler step from the current sigma to the next: sample upcast to f32, plus (sigma_next - sigma) * modelOutput
   * (a bf16 product for a bf16 model, as torch promotes a 0-d f32 tensor with a bf16 one), back to modelOutput's dtype.
   */
  step(modelOutput: Tensor, sample: Tensor): Tensor {
    if (this.stepIndex >= this.timesteps.length) throw new Error(`FlowMatchEulerDiscreteScheduler: step ${this.stepIndex + 1} past the ${this.timesteps.length} of the schedule (call setTimesteps)`);
    const dt = f32(this.sigmas[this.stepIndex + 1]! - this.sigmas[this.stepIndex]!);
    this.stepIndex++;
    const s = new OpScope();
    const prev = s.op('add', [s.op('to', [sample], { dtype: 'f32' }), s.op('mul', [modelOutput, dt])]);
    return s.keep([F.to(prev, modelOutput.dtype)])[0]!;
  }
}
