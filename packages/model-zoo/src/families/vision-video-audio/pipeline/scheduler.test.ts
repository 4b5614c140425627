/**
 * FlowMatchEulerDiscreteScheduler against hand-computed values and numpy's float32 arithmetic as diffusers runs it
 * (the literals below: np.linspace(1, 1/n, n).astype(float32), then exp(mu) / (exp(mu) + (1/t - 1)), float32).
 */
import { Rng, Tensor, roundToDType, toHostArray } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { userError } from '../../../../test/user-error.js';
import { FLUX1_DEV_SCHEDULER_RAW, FlowMatchEulerDiscreteScheduler, calculateShift, fluxDefaultSigmas, parseSchedulerConfig } from './scheduler.js';

const FLUX = parseSchedulerConfig(FLUX1_DEV_SCHEDULER_RAW);

describe('calculate_shift and the default sigmas', () => {
  it('mu is 0.5 at 256 tokens, 1.15 at 4096 (1024²), linear between (512²: 1024 tokens -> 0.63)', () => {
    expect(calculateShift(256)).toBeCloseTo(0.5, 14);
    expect(calculateShift(4096)).toBeCloseTo(1.15, 14);
    // m = 0.65 / 3840, b = 0.5 - 256 m
    expect(calculateShift(1024)).toBeCloseTo(0.5 + (768 * 0.65) / 3840, 14);
    expect(calculateShift(1024)).toBeCloseTo(0.63, 14);
  });

  it('sigmas are linspace(1, 1/n, n) as numpy computes it', () => {
    expect(fluxDefaultSigmas(7)).toEqual([1.0, 0.8571428571428571, 0.7142857142857142, 0.5714285714285714, 0.4285714285714285, 0.2857142857142856, 0.14285714285714285]);
    expect(fluxDefaultSigmas(1)).toEqual([1]);
    expect(userError(() => fluxDefaultSigmas(0)).message).toMatch(/positive integer/);
  });
});

describe('FlowMatchEulerDiscreteScheduler.setTimesteps', () => {
  it('FLUX.1-dev at 1024² (mu 1.15), 4 steps: exp(mu) / (exp(mu) + 1/t - 1) in float32, trailing 0', () => {
    const s = new FlowMatchEulerDiscreteScheduler(FLUX);
    s.setTimesteps(fluxDefaultSigmas(4), calculateShift(4096));
    // by hand: t = 0.75 -> 1/t - 1 = 1/3, e^1.15 = 3.15819 -> 3.15819 / 3.49152 = 0.904531
    const e = Math.exp(1.15);
    expect(s.sigmas[1]).toBeCloseTo(e / (e + 1 / 3), 6);
    expect(s.sigmas[3]).toBeCloseTo(e / (e + 3), 6);
    expect([...s.sigmas]).toEqual([1.0, 0.9045307636260986, 0.7595109343528748, 0.5128441452980042, 0]);
    expect([...s.timesteps]).toEqual([1000.0, 904.53076171875, 759.5109252929688, 512.8441162109375]);
  });

  it('512² (1024 tokens, mu 0.63), 6 steps', () => {
    const s = new FlowMatchEulerDiscreteScheduler(FLUX);
    s.setTimesteps(fluxDefaultSigmas(6), calculateShift(1024));
    expect([...s.sigmas]).toEqual([1.0, 0.9037355780601501, 0.7897047996520996, 0.652489423751831, 0.48421841859817505, 0.27300330996513367, 0]);
    expect([...s.timesteps]).toEqual([1000.0, 903.735595703125, 789.7047729492188, 652.4894409179688, 484.2184143066406, 273.0032958984375]);
  });

  it('without dynamic shifting: the static shift 3 t / (1 + 2 t)', () => {
    const s = new FlowMatchEulerDiscreteScheduler(parseSchedulerConfig({ shift: 3.0 }));
    s.setTimesteps(fluxDefaultSigmas(4));
    expect([...s.sigmas]).toEqual([1.0, 0.8999999761581421, 0.75, 0.5, 0]);
    expect(() => new FlowMatchEulerDiscreteScheduler(FLUX).setTimesteps([1, 0.5])).toThrow(/mu is required/);
  });

  it('bad or unsupported scheduler configs are UserErrors naming the file and field', () => {
    expect(userError(() => parseSchedulerConfig({ _class_name: 'EulerDiscreteScheduler' }, 's.json')).message).toMatch(/_class_name 'EulerDiscreteScheduler' is not FlowMatchEulerDiscreteScheduler .*in s.json/);
    expect(userError(() => parseSchedulerConfig({ use_karras_sigmas: true }, 's.json')).message).toMatch(/use_karras_sigmas true is not supported/);
    expect(userError(() => parseSchedulerConfig({ num_train_timesteps: 0 }, 's.json')).message).toMatch(/invalid field num_train_timesteps in s.json/);
  });
});

describe('FlowMatchEulerDiscreteScheduler.step', () => {
  it('x + (sigma_next - sigma) v, step after step to sigma 0 (f32), and the bf16 rounding of diffusers', () => {
    const backend = cpuBackend();
    const s = new FlowMatchEulerDiscreteScheduler(FLUX);
    s.setTimesteps(fluxDefaultSigmas(3), 0.8);
    const rng = new Rng(3);
    const n = 24;
    let x = Tensor.fromArray(backend, rng.fillNormal(n, 1), [2, 3, 4], 'f32');
    let want = Float64Array.from(toHostArray(x).data);
    for (let i = 0; i < 3; i++) {
      const vals = rng.fillNormal(n, 1);
      const v = Tensor.fromArray(backend, vals, [2, 3, 4], 'f32');
      const y = s.step(v, x);
      const dt = Math.fround(s.sigmas[i + 1]! - s.sigmas[i]!);
      want = want.map((w, j) => Math.fround(w + dt * Math.fround(vals[j]!)));
      expect([...toHostArray(y).data].map((a, j) => Math.abs(a - want[j]!)).every((d) => d < 1e-6)).toBe(true);
      x.dispose();
      v.dispose();
      x = y;
    }
    expect(s.sigmas[3]).toBe(0);
    expect(() => s.step(x, x)).toThrow(/past the 3 of the schedule/);
    x.dispose();

    // bf16: the product dt * v is a bf16 tensor before the f32 add, the result rounded to bf16
    const b = new FlowMatchEulerDiscreteScheduler(FLUX);
    b.setTimesteps(fluxDefaultSigmas(2), 1.15);
    const xs = rng.fillNormal(n, 1);
    const vs = rng.fillNormal(n, 1);
    const xb = Tensor.fromArray(backend, xs, [n], 'bf16');
    const vb = Tensor.fromArray(backend, vs, [n], 'bf16');
    const yb = b.step(vb, xb);
    expect(yb.dtype).toBe('bf16');
    const dt = Math.fround(b.sigmas[1]! - b.sigmas[0]!);
    const bf = (v: number) => roundToDType(v, 'bf16');
    const expected = Array.from(xs, (xv, j) => bf(Math.fround(bf(xv) + bf(Math.fround(dt * bf(vs[j]!))))));
    expect([...toHostArray(yb).data]).toEqual(expected);
    for (const t of [xb, vb, yb]) t.dispose();
  });
});
