/**
 * encoderE2e / captureEncoder on the tiny BGE-M3 and ColBERTv2 fixtures (CPU, f32): the baseline against itself agrees
 * bit for bit with a rate per side; a candidate L1/layer_norm adding 1e-2 fails naming a document; the seeded
 * documents and the --lengths parser.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { OpScope, UserError, type Tensor } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { baselineRegistry } from '../index.js';
import { LayerNorm } from '../layers/norm.js';
import { captureEncoder } from './encoder-capture.js';
import { documentsFor, documentsWorkloadName, parseLengthRange } from './encoder-documents.js';
import { cosine, encoderE2e, multiVectorCosine, sparseCosine } from './encoder-e2e.js';

const FIXTURES = resolve(import.meta.dirname, '../../fixtures');
const BGE = join(FIXTURES, 'tiny-bge-m3');
const COLBERT = join(FIXTURES, 'tiny-colbertv2');
const tmp = mkdtempSync(join(tmpdir(), 'fk-encoder-e2e-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

class OffByOneHundredth extends LayerNorm {
  override forward(x: Tensor): Tensor {
    const s = new OpScope();
    const y = s.own(super.forward(x));
    return s.keep([s.op('add', [y, 1e-2])])[0]!;
  }
}

describe('encoderE2e (CPU)', () => {
  const backend = cpuBackend();
  const baseline = baselineRegistry();
  const spec = { count: 6, lengths: [4, 30] as [number, number], seed: 3 };

  it('the baseline against itself: every output identical, rates with intervals (BGE-M3: dense, sparse, multi-vector)', () => {
    const documents = documentsFor(BGE, spec);
    expect(documents.map((d) => d.length).every((n) => n >= 4 && n <= 30)).toBe(true);
    expect(documents.flat().every((id) => id >= 3 && id < 64)).toBe(true);
    const r = encoderE2e(baseline, baseline.child('candidate'), { dir: BGE, backend, documents, repeats: 3, maxNumBatchedTokens: 48 });
    expect(r.poolings).toEqual(['dense', 'sparse', 'multi-vector']);
    expect(r.timedPoolings).toEqual(['dense', 'sparse']);
    expect(r.correctness).toMatchObject({ passed: true, identical: 6, worst: 1, minCosine: 0.99999 });
    expect(r.correctness.sparse).toHaveLength(6);
    expect(r.baseline.batches).toBeGreaterThan(1);
    expect(r.baseline.sequencesPerS.n).toBe(3);
    expect(r.candidate.tokensPerS.mean).toBeCloseTo((r.candidate.sequencesPerS.mean * r.tokens) / 6, 6);
    expect(r.speedup.ci95[0]).toBeLessThanOrEqual(r.speedup.ci95[1]);
  });

  it('a candidate layer norm that adds 1e-2 fails, naming the document (ColBERTv2 multi-vectors too)', () => {
    for (const dir of [BGE, COLBERT]) {
      const candidate = baseline.child('candidate');
      candidate.override('L1/layer_norm', OffByOneHundredth);
      const r = encoderE2e(baseline, candidate, { dir, backend, documents: documentsFor(dir, spec), repeats: 1 });
      expect(r.correctness.passed).toBe(false);
      expect(r.correctness.reason).toMatch(/^document \d+ \(\d+ tokens\): (dense embedding|multi-vector) cosine [\d.]+ < 0.99999/);
      expect(r.correctness.identical).toBe(0);
    }
  });

  it('captureEncoder records the packed run', () => {
    const documents = documentsFor(COLBERT, spec);
    const r = captureEncoder({ baseline, dir: COLBERT, backend, documents, workload: documentsWorkloadName(spec), outDir: join(tmp, 'cap'), maxNumBatchedTokens: 40 });
    expect(r.index.workload).toBe('documents:6:4-30:3');
    expect(r.documents).toBe(6);
    expect(Object.keys(r.index.tasks)).toContain('L2/encoder_mlp');
  });

  it('cosines and the --lengths parser', () => {
    expect(cosine([1, 0], [0, 0])).toBe(0);
    expect(cosine([0, 0], [0, 0])).toBe(1);
    expect(cosine([1, NaN], [1, 1])).toBe(-Infinity);
    expect(sparseCosine({ 5: 1 }, { 6: 1 })).toBe(0);
    expect(multiVectorCosine([[1]], [[1], [1]])).toBe(0);
    expect(parseLengthRange('U[32, 512]')).toEqual([32, 512]);
    expect(parseLengthRange('32-512')).toEqual([32, 512]);
    expect(() => parseLengthRange('512-32')).toThrow(UserError);
    expect(() => documentsFor(BGE, { ...spec, lengths: [4, 100] })).toThrow(/at most/);
  });
});
