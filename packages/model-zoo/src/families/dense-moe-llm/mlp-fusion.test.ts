/**
 * LlamaMLP's fused gate_up + silu (ops.linearSiluAndMul, optional): taken only when both sub-modules are our own and the
 * backend offers it, the result the same as the two-module path, and never when a candidate or the capture's
 * instrumentation stands in for either module.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor, compareTensors, toHostArray, type Module } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { RecordingBackend, type FusedMode } from '../../../test/recording-backend.js';
import { baselineRegistry } from '../../index.js';
import { initProjections } from './L2/attention.js';
import type { LlamaMLP } from './L2/llama_mlp.js';
import { SiluAndMul } from '../../tasks/L1/activation/silu_and_mul.js';

/** The CPU backend logging linear / siluAndMul; linearSiluAndMul composes (the CPU op), declines (null) or is absent. */
const recording = (mode: FusedMode = 'composes') => new RecordingBackend(['linear', 'siluAndMul'], 'linearSiluAndMul', mode);

function buildMlp(backend: CpuBackend, registry = baselineRegistry()): LlamaMLP {
  const ctx = { backend, device: 0, dtype: 'f32' as const, registry };
  const m = registry.createIn(ctx, 'L2/llama_mlp', 32, 48) as LlamaMLP;
  initProjections(m as unknown as Module, new Rng(7));
  return m;
}

const input = (backend: CpuBackend) => Tensor.fromArray(backend, new Rng(8).fillNormal(3 * 32, 1), [3, 32], 'f32');

describe('LlamaMLP: gate_up + silu through ops.linearSiluAndMul', () => {
  it('takes the fused op when both modules are ours, with the two-module result', () => {
    const fused = recording();
    const y = buildMlp(fused).forward(input(fused));
    expect(fused.calls).toEqual(['linearSiluAndMul', 'linear']); // down_proj is the one linear left
    for (const mode of ['declines', 'absent'] as const) {
      const plain = recording(mode);
      const ref = buildMlp(plain).forward(input(plain));
      expect(plain.calls).toEqual([...(mode === 'declines' ? ['linearSiluAndMul'] : []), 'linear', 'siluAndMul', 'linear']);
      expect(compareTensors(y, toHostArray(ref), { atol: 0, rtol: 0 }).status).toBe('PASSED');
    }
  });

  it('runs the two modules when a candidate replaces silu_and_mul', () => {
    const backend = recording();
    class CandidateSilu extends SiluAndMul {
      override forward(x: Tensor): Tensor {
        return super.forward(x);
      }
    }
    const registry = baselineRegistry().child('candidate');
    registry.override('L1/silu_and_mul', CandidateSilu);
    buildMlp(backend, registry).forward(input(backend));
    expect(backend.calls).toEqual(['linear', 'siluAndMul', 'linear']);
  });

  it('runs the two modules when forward is wrapped on the instance (as an instrumented module would be)', () => {
    const backend = recording();
    const m = buildMlp(backend);
    const act = (m as unknown as { actFn: SiluAndMul }).actFn;
    const own = act.forward.bind(act);
    act.forward = (x: Tensor) => own(x);
    m.forward(input(backend));
    expect(backend.calls).toEqual(['linear', 'siluAndMul', 'linear']);
  });
});
