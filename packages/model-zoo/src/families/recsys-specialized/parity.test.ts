/**
 * BGE-M3 and ColBERTv2 against the PyTorch oracles (bench/reference/bge_m3_ref.py, colbert_ref.py: FlagEmbedding's
 * and colbert-ir's heads in plain torch, on encoder_ref.py's plain-torch XLM-RoBERTa / BERT backbone, loading our
 * checkpoints by HF's names). A seeded random checkpoint of the tiny fixtures (init-weights' path); our CPU backend
 * in float64 through the encoder runner (packed, several sequences a forward) and the oracle in float64, each
 * sequence alone: dense vectors, lexical weights (token sets and values) and multi-vectors. Skipped, saying why,
 * where no Python here imports torch (CI installs Debian's python3-torch; transformers is not needed).
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { referencePython, runReference } from '../../../test/torch-reference.js';
import { EncoderRunner, type EmbedResult, type Pooling } from '../../engine/encoder-runner.js';
import { baselineRegistry } from '../../index.js';
import { loadEncoderModel, writeRandomModelCheckpoint } from '../../models/load-model.js';

const FIXTURES = join(import.meta.dirname, '../../../fixtures');
const PYTHON = referencePython('the BGE-M3 / ColBERTv2 PyTorch parity tests');
const tmp = mkdtempSync(join(tmpdir(), 'fk-embed-parity-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

interface RefRow {
  embedding?: number[];
  sparse?: Record<string, number>;
  multi_vector: number[][];
}

/** A seeded f32 checkpoint of a fixture; our model loaded back from it in float64 on the CPU. */
function checkpointed(fixture: string, seed: number) {
  const dir = join(tmp, fixture);
  cpSync(join(FIXTURES, fixture), dir, { recursive: true });
  const raw = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  const registry = baselineRegistry();
  writeRandomModelCheckpoint(dir, raw, { seed, dtype: 'f32', registry });
  const loaded = loadEncoderModel(dir, { backend: cpuBackend(), registry, dtype: 'f64' });
  expect(loaded.weights).toBe('checkpoint');
  return { dir, loaded };
}

function reference(script: string, dir: string, seqs: number[][], extra: string[]): RefRow[] {
  const inputs = join(dir, 'inputs.jsonl');
  const out = join(dir, 'ref.jsonl');
  writeFileSync(inputs, seqs.map((s) => JSON.stringify(s)).join('\n') + '\n');
  runReference(PYTHON!, script, ['--model', dir, '--inputs', inputs, '--out', out, ...extra]);
  return readFileSync(out, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as RefRow);
}

const maxAbs = (a: readonly number[], b: readonly number[]) => {
  expect(a.length).toBe(b.length);
  return a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i]!)), 0);
};

/** The largest |ours - oracle| over every vector row of every sequence. */
function vectorsError(ours: readonly (readonly number[])[], ref: readonly (readonly number[])[]): number {
  expect(ours.length).toBe(ref.length);
  return ours.reduce((m, row, t) => Math.max(m, maxAbs(row, ref[t]!)), 0);
}

function run(loaded: ReturnType<typeof checkpointed>['loaded'], seqs: number[][], poolings: Pooling[], skipTokenIds: number[]): EmbedResult[] {
  // a small token budget: several forwards, each packing several sequences
  const runner = new EncoderRunner(loaded.model, loaded.ctx, { padTokenId: 0, maxLength: loaded.geometry.maxPositionEmbeddings, maxNumBatchedTokens: 48, skipTokenIds });
  return runner.embed(seqs, poolings);
}

// float64 on both sides, the same math in another summation order: seen ~1e-15; 1e-10 leaves room for that and
// catches any real difference (one LayerNorm eps off gives ~1e-6, a missing special-token drop a key set mismatch)
const TOL = 1e-10;

describe.skipIf(!PYTHON)('BGE-M3 / ColBERTv2 against the PyTorch oracles (CPU, float64)', () => {
  it('BGE-M3 (tiny-bge-m3): dense, lexical weights and ColBERT vectors of <s> ... </s> sequences, lengths 1 .. 38', () => {
    const { dir, loaded } = checkpointed('tiny-bge-m3', 31);
    const rng = new Rng(5);
    // XLM-R's tokenisation: <s> (0) first, </s> (2) last; ids from a small range so tokens repeat (the max per token
    // id matters) and <unk> (3) occurs (FlagEmbedding drops it with cls, eos, pad)
    const body = (n: number) => Array.from({ length: n }, () => (rng.uniform() < 0.1 ? 3 : rng.int(3, 20)));
    const seqs = [[0], [0, 2], [0, ...body(36), 2], [0, ...body(5), 2], [0, ...body(17), 2], [0, ...body(9), 2]];
    const unused = [0, 1, 2, 3];
    const ours = run(loaded, seqs, ['dense', 'sparse', 'multi-vector'], unused);
    const ref = reference('bge_m3_ref.py', dir, seqs, ['--unused', unused.join(',')]);
    let dense = 0;
    let sparse = 0;
    let colbert = 0;
    seqs.forEach((s, i) => {
      const o = ours[i]!;
      const r = ref[i]!;
      dense = Math.max(dense, maxAbs(o.embedding!, r.embedding!));
      expect(Object.keys(o.sparse!).sort(), `sparse token set of input ${i}`).toEqual(Object.keys(r.sparse!).sort());
      for (const [k, w] of Object.entries(r.sparse!)) sparse = Math.max(sparse, Math.abs(o.sparse![k]! - w));
      expect(o.multiVector!.length, `ColBERT rows of input ${i}`).toBe(s.length - 1);
      colbert = Math.max(colbert, vectorsError(o.multiVector!, r.multi_vector));
    });
    // the drop of special tokens is exercised: some sequence had <unk> and none of its keys are special
    expect(seqs.some((s) => s.includes(3))).toBe(true);
    expect(ours.every((o) => unused.every((u) => !(String(u) in o.sparse!)))).toBe(true);
    console.log(`tiny-bge-m3 parity (ours CPU float64 packed vs bge_m3_ref.py float64): dense ${dense.toExponential(2)}, sparse ${sparse.toExponential(2)}, ColBERT ${colbert.toExponential(2)} max |diff|`);
    for (const e of [dense, sparse, colbert]) expect(e).toBeLessThan(TOL);
    loaded.model.dispose();
  }, 300_000);

  it('ColBERTv2 (tiny-colbertv2): the kept tokens\' vectors, a pad token mid-sequence masked', () => {
    const { dir, loaded } = checkpointed('tiny-colbertv2', 37);
    const rng = new Rng(9);
    const body = (n: number) => Array.from({ length: n }, () => rng.int(1, 48));
    // [CLS] 101-like first id, a pad (0) inside the third sequence: ColBERT masks it, the runner drops its zero row
    const seqs = [[2], [2, ...body(30)], [2, ...body(4), 0, ...body(6)], [2, ...body(11)]];
    const ours = run(loaded, seqs, ['multi-vector'], []);
    const ref = reference('colbert_ref.py', dir, seqs, []);
    let err = 0;
    seqs.forEach((s, i) => {
      expect(ours[i]!.multiVector!.length, `kept rows of input ${i}`).toBe(s.filter((t) => t !== 0).length);
      err = Math.max(err, vectorsError(ours[i]!.multiVector!, ref[i]!.multi_vector));
    });
    console.log(`tiny-colbertv2 parity (ours CPU float64 packed vs colbert_ref.py float64): vectors ${err.toExponential(2)} max |diff|`);
    expect(err).toBeLessThan(TOL);
    loaded.model.dispose();
  }, 300_000);
});
