// bench/suites/decode-profile/decode-ablate.mjs: the bs-1 decode bench's timing diagnostic. The ablated ops must never reach the backend's
// kernels (else the step time bounds nothing), keep their outputs' shapes (else the model stops), and a wrong name must
// be refused with the choices.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { LLMEngine, baselineRegistry, loadModel } from '@fastkernels/model-zoo';
import { afterAll, describe, expect, it } from 'vitest';
import { ABLATABLE, ablateOps, parseAblate } from '../bench/suites/decode-profile/decode-ablate.mjs';
import { writeTinyTpModel } from './tp/gpu-fixture.js';

const dir = mkdtempSync(join(tmpdir(), 'fk-ablate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('bench/suites/decode-profile/decode-ablate.mjs', () => {
  it('parses names split by , or : and refuses an unknown one with the choices', () => {
    expect(parseAblate('rmsNorm:fusedAddRmsNorm')).toEqual(['rmsNorm', 'fusedAddRmsNorm']);
    expect(parseAblate('pagedDecodeAttention, rotaryStoreKvcache')).toEqual(['pagedDecodeAttention', 'rotaryStoreKvcache']);
    expect(parseAblate(undefined)).toEqual([]);
    expect(() => parseAblate('rmsNorm:linear')).toThrowError(`cannot ablate 'linear': choose from ${Object.keys(ABLATABLE).join(', ')}`);
  });

  it('a tiny Llama decodes through the engine with every ablatable op replaced: none of them reaches the backend', () => {
    const model = join(dir, 'model');
    writeTinyTpModel(model);
    const backend = new CpuBackend();
    // the CPU backend's op table is frozen; the CUDA backend's (a CudaOps instance) takes instance properties as is
    const ops = { ...(backend.ops as unknown as Record<string, (...a: unknown[]) => unknown>) };
    (backend as unknown as { ops: unknown }).ops = ops;
    // the layers' norms go through the fused norm + projection op (on CUDA at bs 1 the norms run inside the GEMVs)
    expect(ops.rmsNormLinear).toBeTypeOf('function');
    const reached: string[] = [];
    for (const name of Object.keys(ABLATABLE)) {
      const orig = ops[name]!;
      ops[name] = (...a: unknown[]) => (reached.push(name), orig.apply(ops, a));
    }
    const m = loadModel(model, { backend, registry: baselineRegistry(), dtype: 'f32' });
    const run = () => {
      const e = new LLMEngine(m.model, m.ctx, m.geometry, { maxModelLen: 64, maxNumSeqs: 2, maxNumBatchedTokens: 64, numKvBlocks: 16, graphs: false });
      try {
        return e.generate([{ promptIds: [3, 5, 7, 11], params: { maxTokens: 4, ignoreEos: true } }])[0]!.tokenIds;
      } finally {
        e.dispose();
      }
    };
    expect(run()).toHaveLength(4);
    // the fused rotary + KV write composes on the CPU backend: the unfused pair is never called; the layers' norms run
    // inside rmsNormLinear, so only the final norm (with the last residual) reaches the backend's norm ops
    expect(new Set(reached)).toEqual(new Set(['fusedAddRmsNorm', 'rotaryStoreKvcache', 'pagedDecodeAttention']));
    reached.length = 0;
    const calls = ablateOps(backend, parseAblate(Object.keys(ABLATABLE).join(',')));
    expect(run()).toHaveLength(4);
    expect(reached).toEqual([]);
    // the count per stand-in tells which ablations took something out: the unfused pair's did not
    expect(Object.entries(calls).filter(([, n]) => n === 0).map(([op]) => op).sort()).toEqual(['rotaryEmbedding', 'storeKvcache_']);
    expect(calls.pagedDecodeAttention).toBeGreaterThan(0);
    // ablating the norms made the fused norm + projection decline: every layer's two norms reached the stand-ins
    expect(calls.rmsNorm).toBeGreaterThan(0);
    expect(calls.fusedAddRmsNorm).toBeGreaterThan(calls.rmsNorm!);
    m.model.dispose();
  });
});
