/**
 * BGE-M3 and ColBERTv2 end to end on the CPU: the registry entries resolve the fixture configs, a seeded random
 * checkpoint in HF's names (init-weights' path) loads back by path, and the encoder runner's packed path (token budget,
 * cu_seqlens, varlen attention, pooling from the offsets) gives, per sequence, the float64 reference of that sequence
 * alone (reference.ts: plain loops over HF's math) for random lengths from 1 to the longest the model takes; its outputs
 * do not depend on how the requests are batched; and they equal what the padded runner gave before the packed path
 * (testdata/padded-runner.json, recorded from it on the same seeded checkpoints).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng, toHostArray, type HostArray } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { userError } from '../../../test/user-error.js';
import { EncoderRunner, type EmbedResult, type Pooling } from '../../engine/encoder-runner.js';
import { baselineRegistry } from '../../index.js';
import { loadEncoderModel, loadModel, loadModelConfig, writeRandomModelCheckpoint } from '../../models/load-model.js';
import { SafetensorsFile } from '../../weights/safetensors.js';
import { parseEncoderConfig, type EncoderConfig } from './config.js';
import { refBgeM3Heads, refLinear, refModel, refNormalizeRows } from './reference.js';

const FIXTURES = join(import.meta.dirname, '../../../fixtures');
const tmp = mkdtempSync(join(tmpdir(), 'fk-bge-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

type Golden = { seed: number; seqs: number[][]; results: Record<string, EmbedResult[]> };
const GOLDEN = JSON.parse(readFileSync(join(import.meta.dirname, 'testdata/padded-runner.json'), 'utf8')) as Record<string, Golden>;

const rawOf = (name: string) => JSON.parse(readFileSync(join(FIXTURES, name, 'config.json'), 'utf8')) as Record<string, unknown>;
const names = (file: string) => {
  const f = SafetensorsFile.open(file);
  const n = [...f.tensors.keys()];
  f.close();
  return n;
};
/** Random sequences: first id `first`, then ids in [lo, vocab) (never pad or the special ids); lengths 1 and max included. */
function randomSeqs(rng: Rng, count: number, maxLen: number, first: number, lo: number, vocab: number): number[][] {
  const lens = [1, maxLen, ...Array.from({ length: count - 2 }, () => rng.int(1, maxLen + 1))];
  return lens.map((n) => Array.from({ length: n }, (_, j) => (j === 0 ? first : rng.int(lo, vocab))));
}
const mean = (h: Float64Array, n: number, H: number) => {
  const m = new Float64Array(H);
  for (let t = 0; t < n; t++) for (let j = 0; j < H; j++) m[j] = m[j]! + h[t * H + j]! / n;
  return refNormalizeRows(m, H);
};
function expectClose(got: EmbedResult[], want: EmbedResult[], digits: number): void {
  expect(got.length).toBe(want.length);
  got.forEach((g, i) => {
    expect(g.tokens).toBe(want[i]!.tokens);
    if (want[i]!.embedding) g.embedding!.forEach((v, j) => expect(v, `embedding ${i}.${j}`).toBeCloseTo(want[i]!.embedding![j]!, digits));
    if (want[i]!.sparse) {
      expect(Object.keys(g.sparse!).sort()).toEqual(Object.keys(want[i]!.sparse!).sort());
      for (const [k, w] of Object.entries(want[i]!.sparse!)) expect(g.sparse![k], `sparse ${i}.${k}`).toBeCloseTo(w, digits);
    }
    if (want[i]!.multiVector) {
      expect(g.multiVector!.length).toBe(want[i]!.multiVector!.length);
      g.multiVector!.forEach((row, t) => row.forEach((v, j) => expect(v, `multi-vector ${i}.${t}.${j}`).toBeCloseTo(want[i]!.multiVector![t]![j]!, digits)));
    }
  });
}

describe('BGE-M3 on the packed encoder runner', () => {
  const raw = rawOf('tiny-bge-m3');
  const cfg: EncoderConfig = parseEncoderConfig(raw);
  const dir = join(tmp, 'bge');
  const registry = baselineRegistry();
  const written = writeRandomModelCheckpoint(dir, raw, { seed: GOLDEN['tiny-bge-m3']!.seed, dtype: 'f32', registry });
  const loaded = loadEncoderModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' });
  afterAll(() => loaded.model.dispose());
  const runner = (over: Partial<ConstructorParameters<typeof EncoderRunner>[2]> = {}) =>
    new EncoderRunner(loaded.model, loaded.ctx, { padTokenId: cfg.padTokenId, maxLength: 38, skipTokenIds: [0, 1, 2], ...over });

  it('resolves XLMRobertaModel to the encoder runner; the random checkpoint has HF names and loads back', () => {
    const r = loadModelConfig(join(FIXTURES, 'tiny-bge-m3', 'config.json'));
    expect(r.architecture.name).toBe('bge-m3');
    expect(r.architecture.runner).toBe('encoder');
    // positions start after padding_idx 1: 40 - 2 tokens at most
    expect(r.geometry).toMatchObject({ hiddenSize: 32, numHiddenLayers: 2, maxPositionEmbeddings: 38 });
    expect(written.architecture).toBe('bge-m3');
    const n = names(join(dir, 'model.safetensors'));
    for (const x of ['embeddings.word_embeddings.weight', 'embeddings.position_embeddings.weight', 'encoder.layer.1.attention.self.query.weight', 'encoder.layer.0.attention.output.LayerNorm.bias', 'encoder.layer.1.output.dense.weight', 'colbert_linear.weight', 'sparse_linear.bias']) expect(n).toContain(x);
    expect(n.some((x) => x.startsWith('model.'))).toBe(false);
    expect(loaded.weights).toBe('checkpoint');
    expect(runner().packed).toBe(true);
  });

  it('each sequence equals the float64 reference of that sequence alone (lengths 1 .. 38, packed under a budget)', () => {
    const seqs = randomSeqs(new Rng(21), 9, 38, 0, 3, cfg.vocabSize);
    const r = runner({ maxNumBatchedTokens: 48 });
    const out = r.embed(seqs, ['dense', 'sparse', 'multi-vector']);
    const cls = runner().embed(seqs, ['cls']);
    const meanOut = runner().embed(seqs, ['mean']);
    expect(r.stats.batches).toBeGreaterThan(2); // 48 tokens a forward: the 38-token one nearly alone
    expect(r.stats.paddedTokens).toBe(r.stats.tokens); // packed: no padding
    const params = new Map(loaded.model.namedParameters().map(([k, t]) => [k.replace(/^model\./, ''), toHostArray(t)] as const)) as Map<string, HostArray>;
    const H = cfg.hiddenSize;
    seqs.forEach((s, i) => {
      const h = refModel(s, [0, s.length], params, cfg);
      const ref = refBgeM3Heads(h, [0, s.length], H, params);
      const got = out[i]!;
      expect(got.tokens).toBe(s.length);
      got.embedding!.forEach((v, j) => expect(v).toBeCloseTo(ref.dense[j]!, 5));
      cls[i]!.embedding!.forEach((v, j) => expect(v).toBeCloseTo(ref.dense[j]!, 5)); // dense is the normalised CLS row
      mean(h, s.length, H).forEach((v, j) => expect(meanOut[i]!.embedding![j]).toBeCloseTo(v, 5));
      // ColBERT vectors: every token after the first
      expect(got.multiVector!.length).toBe(s.length - 1);
      got.multiVector!.forEach((row, t) => row.forEach((v, j) => expect(v).toBeCloseTo(ref.colbert[(t + 1) * H + j]!, 5)));
      // sparse: the max weight per token id, special ids (0, 1, 2) and zero weights left out
      const want: Record<string, number> = {};
      s.forEach((id, t) => {
        if (id > 2 && ref.sparse[t]! > 0) want[id] = Math.max(want[id] ?? 0, ref.sparse[t]!);
      });
      expect(Object.keys(got.sparse!).sort()).toEqual(Object.keys(want).sort());
      for (const k of Object.keys(want)) expect(got.sparse![k]).toBeCloseTo(want[k]!, 5);
    });
  });

  it('outputs do not depend on how requests are batched: budgets, batch sizes, order, alone', () => {
    const seqs = randomSeqs(new Rng(5), 12, 38, 0, 3, cfg.vocabSize);
    const all: Pooling[] = ['dense', 'sparse', 'multi-vector'];
    const base = runner({ maxNumBatchedTokens: 16384 }).embed(seqs, all);
    for (const over of [{ maxNumBatchedTokens: 1 }, { maxNumBatchedTokens: 40 }, { maxNumSeqs: 3 }]) {
      const r = runner(over);
      expectClose(r.embed(seqs, all), base, 6);
      expect(r.stats.batches).toBeGreaterThan(1);
    }
    const order = seqs.map((_, i) => i).reverse();
    const reversed = runner().embed(order.map((i) => seqs[i]!), all);
    expectClose(reversed, order.map((i) => base[i]!), 6);
    expectClose(runner().embed([seqs[4]!], all), [base[4]!], 6);
  });

  it('plans in arrival order within the token budget; a sequence over the budget runs alone', () => {
    const r = runner({ maxNumBatchedTokens: 10, maxNumSeqs: 3 });
    expect(r.plan([4, 4, 3, 12, 1, 1, 1, 1])).toEqual([[0, 1], [2], [3], [4, 5, 6], [7]]);
  });

  it('dense / sparse / multi-vector / cls / mean equal the padded runner of before on the same checkpoint', () => {
    const g = GOLDEN['tiny-bge-m3']!;
    for (const [pooling, want] of Object.entries(g.results)) expectClose(runner({ maxNumBatchedTokens: 64 }).embed(g.seqs, [pooling as Pooling]), want, 5);
  });

  it('bad requests are UserErrors: too long, empty', () => {
    expect(userError(() => runner().embed([new Array(39).fill(5)], ['dense'])).message).toMatch(/39 tokens; the model takes at most 38/);
    expect(userError(() => runner().embed([[0, 5], []], ['dense'])).message).toMatch(/input 1 is empty/);
  });

  it('the decoder path refuses an encoder folder with a UserError pointing at embeddings', () => {
    const e = userError(() => loadModel(join(FIXTURES, 'tiny-bge-m3'), { backend: cpuBackend(), registry: baselineRegistry() }));
    expect(e.message).toMatch(/is an encoder model \(bge-m3\): it does not generate text/);
    expect(e.details.fix).toMatch(/v1\/embeddings/);
  });
});

describe('ColBERTv2 on the packed encoder runner', () => {
  const raw = rawOf('tiny-colbertv2');
  const cfg = parseEncoderConfig(raw);
  const dir = join(tmp, 'colbert');
  const registry = baselineRegistry();
  writeRandomModelCheckpoint(dir, raw, { seed: GOLDEN['tiny-colbertv2']!.seed, dtype: 'f32', registry });
  const loaded = loadEncoderModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' });
  afterAll(() => loaded.model.dispose());
  const runner = (over: Partial<ConstructorParameters<typeof EncoderRunner>[2]> = {}) => new EncoderRunner(loaded.model, loaded.ctx, { padTokenId: 0, maxLength: 32, ...over });

  it('HF_ColBERT resolves to colbertv2; its checkpoint names are bert.* and linear.weight', () => {
    expect(loadModelConfig(join(FIXTURES, 'tiny-colbertv2', 'config.json')).architecture.name).toBe('colbertv2');
    const n = names(join(dir, 'model.safetensors'));
    expect(n).toContain('bert.encoder.layer.1.attention.self.key.bias');
    expect(n).toContain('linear.weight');
    expect(n).not.toContain('linear.bias');
  });

  it('multi-vectors equal the float64 reference per sequence, whatever the batching; no dense output', () => {
    const seqs = randomSeqs(new Rng(8), 7, 32, 1, 1, cfg.vocabSize);
    const out = runner({ maxNumBatchedTokens: 40 }).embed(seqs, ['multi-vector']);
    expectClose(runner({ maxNumBatchedTokens: 1 }).embed(seqs, ['multi-vector']), out, 6);
    const params = new Map(loaded.model.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
    const bert = new Map([...params].filter(([k]) => k.startsWith('bert.')).map(([k, v]) => [k.slice(5), v]));
    seqs.forEach((s, i) => {
      const ref = refNormalizeRows(refLinear(refModel(s, [0, s.length], bert, cfg), s.length, params.get('linear.weight')!, null), 16);
      expect(out[i]!.multiVector!.length).toBe(s.length);
      out[i]!.multiVector!.forEach((row, t) => row.forEach((v, j) => expect(v).toBeCloseTo(ref[t * 16 + j]!, 5)));
    });
    expect(userError(() => runner().embed(seqs, ['dense'])).message).toMatch(/no dense output/);
  });

  it('multi-vector / cls / mean equal the padded runner of before on the same checkpoint', () => {
    const g = GOLDEN['tiny-colbertv2']!;
    for (const [pooling, want] of Object.entries(g.results)) expectClose(runner({ maxNumBatchedTokens: 64 }).embed(g.seqs, [pooling as Pooling]), want, 5);
  });
});
