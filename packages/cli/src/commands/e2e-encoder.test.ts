/**
 * `fastkernels e2e` and `capture` on the tiny BGE-M3 / ColBERTv2 encoder folders (CPU): --self-test agrees exactly and
 * prints sequences/s and tokens/s with intervals; a candidate L1/layer_norm that adds 1e-2 fails correctness naming
 * the document; the --out record; capture writes cases `bench --captures` accepts; bad --lengths is a UserError.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { UserError } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { capturedCasesFor, loadCaptures } from '../bench/captures.js';
import { environment } from '../env.js';
import { runCapture, type CaptureArgs } from './capture.js';
import { runE2e, type E2eArgs } from './e2e.js';

const FIXTURES = join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures');
const BGE = join(FIXTURES, 'tiny-bge-m3');
const COLBERT = join(FIXTURES, 'tiny-colbertv2');
const tmp = mkdtempSync(join(tmpdir(), 'fk-cli-e2e-encoder-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const io = () => {
  const o = { stdout: '', stderr: '', out: (t: string) => void (o.stdout += t), err: (t: string) => void (o.stderr += t) };
  return o;
};
const base: E2eArgs = {
  model: BGE, backend: 'cpu', maxNumSeqs: 4, maxNumBatchedTokens: 64, gpuMemoryUtilization: 0.9, graphs: true, workload: 'all',
  requests: 'synthetic:1:1-1:1-1:0', latencyBatchSizes: '1', latencyPrompt: 8, latencyOutput: 3, warmups: 1, repeats: 3, timeout: 600,
  documents: 8, lengths: 'U[4, 30]',
};

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
    const dir = join(tmp, 'cands');
    mkdirSync(join(dir, 'L1'), { recursive: true });
    writeFileSync(join(dir, 'L1/layer_norm.ts'), `import { OpScope, type Tensor } from '@fastkernels/core';
import { nn } from '@fastkernels/model-zoo';
export class LayerNorm extends nn.LayerNorm {
  constructor(normalizedShape: number | readonly number[], eps = 1e-5, elementwiseAffine = true, bias = true) {
    super(normalizedShape, eps, elementwiseAffine, bias);
  }
  override forward(x: Tensor): Tensor {
    const s = new OpScope();
    const y = s.own(super.forward(x));
    return s.keep([s.op('add', [y, 1e-2])])[0]!;
  }
}
`);
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
    const args = { model: BGE, out, workload: 'synthetic:1:1-1:1-1:0', backend: 'cpu', maxNumBatchedTokens: 48, documents: 6, lengths: '4-30' } as CaptureArgs;
    runCapture(args, o);
    expect(o.stdout).toMatch(/^captured 6 documents \(\d+ tokens, \d+ packed batches\)/);
    expect(o.stdout).toMatch(/L3\/xlm_roberta_model\s+1 init\s+4 shapes/);
    const caps = loadCaptures(out);
    expect(caps.indexes[0]!.index.workload).toBe('documents:6:4-30:0');
    const env = environment();
    const ids = Object.keys(caps.indexes[0]!.index.tasks);
    expect(ids).toEqual(expect.arrayContaining(['L1/layer_norm', 'L2/encoder_mlp']));
    for (const id of ids) expect(capturedCasesFor(env.taskMap.get(id)!, caps, 64).length, id).toBeGreaterThan(0);
    expect(() => runCapture({ ...args, lengths: '30-4' }, io())).toThrow(UserError);
  });
});
