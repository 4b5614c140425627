/**
 * LlamaMLP's fused gate_up + silu (ops.linearSiluAndMul, optional): taken only when both sub-modules are our own and the
 * backend offers it, the result the same as the two-module path, and never when a candidate or the capture's
 * instrumentation stands in for either module.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor, compareTensors, toHostArray, type Module, type Ops } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { baselineRegistry } from '../../index.js';
import { initProjections } from './L2/attention.js';
import type { LlamaMLP } from './L2/llama_mlp.js';
import { SiluAndMul } from './L1/silu_and_mul.js';

/** A CPU backend whose ops also offer linearSiluAndMul (the composition, or a refusal), counting the calls. */
function fusingBackend(decline = false) {
  const b = new CpuBackend();
  const calls = { fused: 0, linear: 0, silu: 0 };
  const base = b.ops;
  const ops: Ops = {
    ...base,
    linear: (x, w, bias) => (calls.linear++, base.linear(x, w, bias)),
    siluAndMul: (x) => (calls.silu++, base.siluAndMul(x)),
    linearSiluAndMul: (x, w, bias) => {
      calls.fused++;
      if (decline) return null;
      const g = base.linear(x, w, bias);
      const y = base.siluAndMul(g);
      g.dispose();
      return y;
    },
  };
  (b as unknown as { ops: Ops }).ops = ops;
  return { backend: b, calls };
}

function buildMlp(backend: CpuBackend, registry = baselineRegistry()): LlamaMLP {
  const ctx = { backend, device: 0, dtype: 'f32' as const, registry };
  const m = registry.createIn(ctx, 'L2/llama_mlp', 32, 48) as LlamaMLP;
  initProjections(m as unknown as Module, new Rng(7));
  return m;
}

const input = (backend: CpuBackend) => Tensor.fromArray(backend, new Rng(8).fillNormal(3 * 32, 1), [3, 32], 'f32');

describe('LlamaMLP: gate_up + silu through ops.linearSiluAndMul', () => {
  it('takes the fused op when both modules are ours, with the two-module result', () => {
    const fused = fusingBackend();
    const plain = fusingBackend(true);
    const y = buildMlp(fused.backend).forward(input(fused.backend));
    const ref = buildMlp(plain.backend).forward(input(plain.backend));
    expect(fused.calls).toEqual({ fused: 1, linear: 1, silu: 0 }); // down_proj is the one linear left
    expect(plain.calls).toEqual({ fused: 1, linear: 2, silu: 1 }); // declined: gate_up, silu, down
    expect(compareTensors(y, toHostArray(ref), { atol: 0, rtol: 0 }).status).toBe('PASSED');
  });

  it('runs the two modules when a candidate replaces silu_and_mul', () => {
    const { backend, calls } = fusingBackend();
    class CandidateSilu extends SiluAndMul {
      override forward(x: Tensor): Tensor {
        return super.forward(x);
      }
    }
    const registry = baselineRegistry().child('candidate');
    registry.override('L1/silu_and_mul', CandidateSilu);
    buildMlp(backend, registry).forward(input(backend));
    expect(calls).toEqual({ fused: 0, linear: 2, silu: 1 });
  });

  it('runs the two modules when forward is wrapped on the instance (as an instrumented module would be)', () => {
    const { backend, calls } = fusingBackend();
    const m = buildMlp(backend);
    const act = (m as unknown as { actFn: SiluAndMul }).actFn;
    const own = act.forward.bind(act);
    act.forward = (x: Tensor) => own(x);
    m.forward(input(backend));
    expect(calls).toEqual({ fused: 0, linear: 2, silu: 1 });
  });
});
