/**
 * `fastkernels e2e` and `capture` on the tiny BGE-M3 / ColBERTv2 encoder folders (CPU): --self-test agrees exactly and
 * prints sequences/s and tokens/s with intervals; a candidate L1/layer_norm that adds 1e-2 fails correctness naming
 * the document; the --out record; capture writes cases `bench --captures` accepts; bad --lengths is a UserError.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { runCapture } from './capture.js';
import { runE2e } from './e2e.js';
import { recordingIo as io, cpuCaptureArgs, cpuE2eArgs, expectCasesBuild, fixture, offsetCandidate, tempDir, writeFiles } from './e2e-fixtures.suite.js';

const BGE = fixture('tiny-bge-m3');
const COLBERT = fixture('tiny-colbertv2');
const tmp = tempDir('fk-cli-e2e-encoder-');

const base = cpuE2eArgs(BGE, { maxNumBatchedTokens: 64, documents: 8, lengths: 'U[4, 30]' });

describe('fastkernels e2e on an encoder folder (CPU)', () => {
  it('--self-test: exact agreement, sequences/s and tokens/s with intervals, the --out record', async () => {
    const out = join(tmp, 'self.json');
    const o = io();
    await runE2e({ ...base, selfTest: true, out }, o);
    expect(o.stdout).toMatch(/8 documents \(\d+ tokens, lengths U\[4, 30\]\), f32, \d+ packed batches; outputs dense, sparse, multi-vector \(timed: dense, sparse\); candidates: none/);
    expect(o.stdout).toMatch(/sequences\/s\s+baseline [\d.]+ \[[\d.-]+, [\d.]+\]\s+candidate [\d.]+ \[/);
    expect(o.stdout).toMatch(/tokens\/s\s+baseline \d+ \[-?\d+, \d+\]/);
    expect(o.stdout).toMatch(/correct\s+yes; 8\/8 identical; least cosine 1\.0000000 \(threshold 0\.99999\)/);
    const rec = JSON.parse(readFileSync(out, 'utf8')) as { mode: string; documents: number; correctness: { passed: boolean; dense: number[] }; baseline: { sequencesPerS: { n: number } } };
    expect(rec).toMatchObject({ mode: 'self-test', documents: 8, correctness: { passed: true } });
    expect(rec.correctness.dense).toEqual(new Array(8).fill(1));
    expect(rec.baseline.sequencesPerS.n).toBe(3);
  });

  it('a candidate layer norm that adds 1e-2 fails correctness, naming the document (BGE-M3 and ColBERTv2)', async () => {
    const dir = writeFiles(join(tmp, 'cands'), {
      'L1/layer_norm.ts': offsetCandidate({
        cls: 'LayerNorm', base: 'nn.LayerNorm', imports: "import { nn } from '@fastkernels/model-zoo';", addend: '1e-2',
        ctor: { params: 'normalizedShape: number | readonly number[], eps = 1e-5, elementwiseAffine = true, bias = true', args: 'normalizedShape, eps, elementwiseAffine, bias' },
      }),
    });
    for (const model of [BGE, COLBERT]) {
      const o = io();
      await runE2e({ ...base, model, candidates: dir, repeats: 1 }, o);
      expect(o.stdout).toMatch(/candidates: L1\/layer_norm/);
      expect(o.stdout).toMatch(/correct\s+no: document \d+ \(\d+ tokens\): (dense embedding|multi-vector) cosine [\d.]+ < 0\.99999/);
    }
  });

  it('capture writes cases bench --captures accepts; bad --lengths is a UserError', () => {
    const out = join(tmp, 'cap');
    const o = io();
    const args = cpuCaptureArgs(BGE, out, { maxNumBatchedTokens: 48, documents: 6, lengths: '4-30' });
    runCapture(args, o);
    expect(o.stdout).toMatch(/^captured 6 documents \(\d+ tokens, \d+ packed batches\)/);
    expect(o.stdout).toMatch(/L3\/xlm_roberta_model\s+1 init\s+4 shapes/);
    const { workload, ids } = expectCasesBuild(out);
    expect(workload).toBe('documents:6:4-30:0');
    expect(ids).toEqual(expect.arrayContaining(['L1/layer_norm', 'L2/encoder_mlp']));
    expect(() => runCapture({ ...args, lengths: '30-4' }, io())).toThrow(UserError);
  });
});
