/**
 * LlamaDecoderLayer's RMSNorms inside the next projection (Ops.rmsNormLinear, optional): input_layernorm + qkv_proj and
 * post_attention_layernorm + gate_up + silu, each one backend op where the backend offers it and the modules involved run
 * their own forward; the results are those of the separate modules, and a candidate or the capture's instrumentation
 * sees every call. The GPU kernel that could differ (fk_gemv_stream with FK_NORM) is checked bit for bit in
 * backend-cuda's linear-gemv.gpu.test.ts.
 */
import { Rng, compareTensors, toHostArray, type Module, type ModuleRegistry, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { blamingRegistry, instrumentRegistry } from '../../../engine/instrument.js';
import { baselineRegistry } from '../../../index.js';
import { RecordingBackend, type FusedMode } from '../../../../test/recording-backend.js';
import { llamaDecoderTask } from './llama_decoder.js';

const WATCHED = ['rmsNorm', 'fusedAddRmsNorm', 'rmsNormLinear'] as const;
/** The CPU backend logging its norm calls; rmsNormLinear composes (the CPU op), declines (null) or is absent. */
const recording = (mode: FusedMode) => new RecordingBackend(['rmsNorm', 'fusedAddRmsNorm'], 'rmsNormLinear', mode);

/** One forward of a CI case of L3/llama_decoder (seeded), checked against the float64 reference; host outputs and calls. */
function runDecoder(backend: RecordingBackend, caseName: string, registry: ModuleRegistry = baselineRegistry()) {
  const c = llamaDecoderTask.cases.ci.find((x) => x.name === caseName)!;
  const ctx = { backend, device: 0, dtype: c.dtype, registry };
  const m = registry.createIn<Module & { forward(p: Tensor, h: Tensor, r: Tensor | null): [Tensor, Tensor] }>(ctx, 'L3/llama_decoder', ...c.init);
  const rng = new Rng(11);
  llamaDecoderTask.initParameters!(m, c, rng);
  const inputs = llamaDecoderTask.makeInputs(c, ctx, rng) as [Tensor, Tensor, Tensor | null];
  const [y, r] = m.forward(...inputs);
  const params = new Map(m.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
  const expected = llamaDecoderTask.reference(inputs.map((t) => (t ? toHostArray(t) : null)) as never, params, c);
  const tol = c.dtype === 'bf16' ? { atol: 3e-2, rtol: 3e-2 } : { atol: 1e-4, rtol: 1e-3 };
  expect(compareTensors(y, expected[0]!, tol).status).toBe('PASSED');
  expect(compareTensors(r, expected[1]!, tol).status).toBe('PASSED');
  const out = { y: Array.from(toHostArray(y).data), r: Array.from(toHostArray(r).data), calls: backend.calls.filter((x) => (WATCHED as readonly string[]).includes(x)) };
  y.dispose();
  r.dispose();
  m.dispose();
  return out;
}

describe('LlamaDecoderLayer: RMSNorm inside the next projection (Ops.rmsNormLinear)', () => {
  const cases: [string, string[]][] = [
    ['tiny-llama-mixed-f32', ['fusedAddRmsNorm', 'fusedAddRmsNorm']], // a residual: both norms add it
    ['tiny-llama-first-layer-bf16', ['rmsNorm', 'fusedAddRmsNorm']], // the first layer: no residual into input_layernorm
    ['tiny-qwen2-bias-f32', ['fusedAddRmsNorm', 'fusedAddRmsNorm']], // qkv bias
  ];
  for (const [caseName, unfused] of cases) {
    it(`${caseName}: one op per norm when the backend has it, the modules when it declines or lacks it, the same bits`, () => {
      const fused = runDecoder(recording('composes'), caseName);
      expect(fused.calls).toEqual(['rmsNormLinear', 'rmsNormLinear']);
      const declined = runDecoder(recording('declines'), caseName);
      expect(declined.calls).toEqual(['rmsNormLinear', unfused[0]!, 'rmsNormLinear', unfused[1]!]);
      const absent = runDecoder(recording('absent'), caseName);
      expect(absent.calls).toEqual(unfused);
      for (const other of [declined, absent]) {
        expect(other.y).toEqual(fused.y);
        expect(other.r).toEqual(fused.r);
      }
    });
  }

  it('not for a norm, projection or sub-layer that is a candidate (the blame wrapper stands in for one): its own forward runs', () => {
    const only = (ids: string[]) => runDecoder(recording('composes'), 'tiny-llama-mixed-f32', blamingRegistry(baselineRegistry(), new Set(ids))).calls;
    expect(only(['L1/rms_norm'])).toEqual(['fusedAddRmsNorm', 'fusedAddRmsNorm']);
    expect(only(['L1/linear'])).toEqual(['fusedAddRmsNorm', 'fusedAddRmsNorm']); // qkv_proj and gate_up are L1/linear
    expect(only(['L2/attention'])).toEqual(['fusedAddRmsNorm', 'rmsNormLinear']);
    expect(only(['L2/llama_mlp'])).toEqual(['rmsNormLinear', 'fusedAddRmsNorm']);
    expect(only(['L1/silu_and_mul'])).toEqual(['rmsNormLinear', 'fusedAddRmsNorm']);
    expect(only(['L1/rotary_emb'])).toEqual(['rmsNormLinear', 'rmsNormLinear']); // unrelated to the norms: still fused
  });

  it('not under an instrumented registry (the capture tool): every norm and projection is seen', () => {
    const seen: string[] = [];
    const registry = instrumentRegistry(baselineRegistry(), { onForward: (id, _m, _a, run) => (seen.push(id), run()) });
    const r = runDecoder(recording('composes'), 'tiny-llama-mixed-f32', registry);
    expect(r.calls).toEqual(['fusedAddRmsNorm', 'fusedAddRmsNorm']);
    expect(seen.filter((id) => id === 'L1/rms_norm')).toHaveLength(2);
    expect(seen.filter((id) => id === 'L1/linear')).toHaveLength(4); // qkv, o, gate_up, down
  });
});
