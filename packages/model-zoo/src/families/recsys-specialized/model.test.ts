/**
 * BGE-M3 end to end on the CPU: the registry entry resolves BAAI/bge-m3's config.json shape, a seeded random
 * checkpoint in its names (init-weights' path) loads back by path, the encoder runner's batched padded forward and
 * poolings match the float64 reference (reference.ts, plain loops) on the loaded tensors, a sequence's embedding does
 * not depend on what it is batched with, and the decoder path refuses the model.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toHostArray } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { userError } from '../../../test/user-error.js';
import { EncoderRunner } from '../../engine/encoder-runner.js';
import { baselineRegistry } from '../../index.js';
import { loadEncoderModel, loadModel, loadModelConfig, writeRandomModelCheckpoint } from '../../models/load-model.js';
import { SafetensorsFile } from '../../weights/safetensors.js';
import { parseEncoderConfig, type EncoderConfig } from './config.js';
import { refBgeM3Heads, refLinear, refModel, refNormalizeRows } from './reference.js';

const FIXTURE = join(import.meta.dirname, '../../../fixtures/tiny-bge-m3');
const tmp = mkdtempSync(join(tmpdir(), 'fk-bge-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const raw = JSON.parse(readFileSync(join(FIXTURE, 'config.json'), 'utf8')) as Record<string, unknown>;
const cfg: EncoderConfig = parseEncoderConfig(raw);
const SEQS = [
  [0, 5, 9, 17, 2],
  [0, 33, 2],
  [0, 7, 7, 40, 12, 63, 21, 8, 2],
  [0, 2],
];

describe('BGE-M3 through the model registry', () => {
  it('resolves XLMRobertaModel to the encoder runner with the config geometry', () => {
    const r = loadModelConfig(join(FIXTURE, 'config.json'));
    expect(r.architecture.name).toBe('bge-m3');
    expect(r.architecture.runner).toBe('encoder');
    // positions start after padding_idx 1: 40 - 2 tokens at most
    expect(r.geometry).toMatchObject({ hiddenSize: 32, numHiddenLayers: 2, maxPositionEmbeddings: 38 });
  });

  it('a random checkpoint in HF names loads back; the runner matches the float64 reference; batching does not change a result', () => {
    const dir = join(tmp, 'ckpt');
    const registry = baselineRegistry();
    const w = writeRandomModelCheckpoint(dir, raw, { seed: 3, dtype: 'f32', registry });
    expect(w.architecture).toBe('bge-m3');
    const file = SafetensorsFile.open(join(dir, 'model.safetensors'));
    const names = [...file.tensors.keys()];
    file.close();
    for (const n of ['embeddings.word_embeddings.weight', 'embeddings.position_embeddings.weight', 'encoder.layer.1.attention.self.query.weight', 'encoder.layer.0.attention.output.LayerNorm.bias', 'encoder.layer.1.output.dense.weight', 'colbert_linear.weight', 'sparse_linear.bias']) expect(names).toContain(n);
    expect(names.some((n) => n.startsWith('model.'))).toBe(false);

    const loaded = loadEncoderModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' });
    expect(loaded.weights).toBe('checkpoint');
    const runner = new EncoderRunner(loaded.model, loaded.ctx, { padTokenId: cfg.padTokenId, maxLength: 38, maxBatchTokens: 20, skipTokenIds: [0, 1, 2, 3] });
    const out = runner.embed(SEQS, ['dense', 'sparse', 'multi-vector']);
    expect(runner.stats.batches).toBeGreaterThan(1); // the 20-token budget splits the batch

    const params = new Map(loaded.model.namedParameters().map(([k, t]) => [k.replace(/^model\./, ''), toHostArray(t)] as const));
    const H = cfg.hiddenSize;
    SEQS.forEach((s, i) => {
      const h = refModel(s, s.map(() => 1), 1, s.length, params, cfg);
      const ref = refBgeM3Heads(h, s.map(() => 1), 1, s.length, H, params);
      const got = out[i]!;
      expect(got.tokens).toBe(s.length);
      got.embedding!.forEach((v, j) => expect(v).toBeCloseTo(ref.dense[j]!, 5));
      expect(got.multiVector!.length).toBe(s.length - 1);
      got.multiVector!.forEach((row, t) => row.forEach((v, j) => expect(v).toBeCloseTo(ref.colbert[t * H + j]!, 5)));
      const want: Record<string, number> = {};
      s.forEach((id, t) => {
        if (id > 3 && ref.sparse[t]! > 0) want[id] = Math.max(want[id] ?? 0, ref.sparse[t]!);
      });
      expect(Object.keys(got.sparse!).sort()).toEqual(Object.keys(want).sort());
      for (const k of Object.keys(want)) expect(got.sparse![k]).toBeCloseTo(want[k]!, 5);
    });

    // alone vs. padded beside longer sequences: the same vectors (the padding mask holds)
    const alone = new EncoderRunner(loaded.model, loaded.ctx, { padTokenId: 1, maxLength: 38 }).embed([SEQS[1]!], ['dense', 'cls', 'mean']);
    const batched = new EncoderRunner(loaded.model, loaded.ctx, { padTokenId: 1, maxLength: 38 }).embed(SEQS, ['cls']);
    alone[0]!.embedding!.forEach((v, j) => expect(batched[1]!.embedding![j]).toBeCloseTo(v, 5));

    // mean pooling: the normalised mean of the token states
    const s = SEQS[2]!;
    const h = refModel(s, s.map(() => 1), 1, s.length, params, cfg);
    const mean = new Float64Array(H);
    for (let t = 0; t < s.length; t++) for (let j = 0; j < H; j++) mean[j] = mean[j]! + h[t * H + j]! / s.length;
    const m = new EncoderRunner(loaded.model, loaded.ctx, { padTokenId: 1, maxLength: 38 }).embed(SEQS, ['mean'])[2]!.embedding!;
    refNormalizeRows(mean, H).forEach((v, j) => expect(m[j]).toBeCloseTo(v, 5));

    expect(userError(() => runner.embed([new Array(39).fill(5)], ['dense'])).message).toMatch(/39 tokens; the model takes at most 38/);
    loaded.model.dispose();
  });

  it('the decoder path refuses an encoder folder with a UserError pointing at embeddings', () => {
    const e = userError(() => loadModel(FIXTURE, { backend: cpuBackend(), registry: baselineRegistry() }));
    expect(e.message).toMatch(/is an encoder model \(bge-m3\): it does not generate text/);
    expect(e.details.fix).toMatch(/v1\/embeddings/);
  });
});

describe('ColBERTv2 through the model registry', () => {
  const COLBERT = join(import.meta.dirname, '../../../fixtures/tiny-colbertv2');
  const craw = JSON.parse(readFileSync(join(COLBERT, 'config.json'), 'utf8')) as Record<string, unknown>;
  const ccfg = parseEncoderConfig(craw);

  it('HF_ColBERT resolves to colbertv2; its checkpoint names are bert.* and linear.weight; multi-vectors match the float64 reference', () => {
    expect(loadModelConfig(join(COLBERT, 'config.json')).architecture.name).toBe('colbertv2');
    const dir = join(tmp, 'colbert');
    const registry = baselineRegistry();
    writeRandomModelCheckpoint(dir, craw, { seed: 5, dtype: 'f32', registry });
    const file = SafetensorsFile.open(join(dir, 'model.safetensors'));
    const names = [...file.tensors.keys()];
    file.close();
    expect(names).toContain('bert.encoder.layer.1.attention.self.key.bias');
    expect(names).toContain('linear.weight');
    expect(names).not.toContain('linear.bias');
    const loaded = loadEncoderModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' });
    const runner = new EncoderRunner(loaded.model, loaded.ctx, { padTokenId: 0, maxLength: 32 });
    const seqs = [[1, 9, 17, 4, 2], [1, 33, 2]];
    const out = runner.embed(seqs, ['multi-vector']);
    const params = new Map(loaded.model.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
    const bert = new Map([...params].filter(([k]) => k.startsWith('bert.')).map(([k, v]) => [k.slice(5), v]));
    seqs.forEach((s, i) => {
      const h = refModel(s, s.map(() => 1), 1, s.length, bert, ccfg);
      const ref = refNormalizeRows(refLinear(h, s.length, params.get('linear.weight')!, null), 16);
      expect(out[i]!.multiVector!.length).toBe(s.length);
      out[i]!.multiVector!.forEach((row, t) => row.forEach((v, j) => expect(v).toBeCloseTo(ref[t * 16 + j]!, 5)));
    });
    expect(userError(() => runner.embed(seqs, ['dense'])).message).toMatch(/no dense output/);
    loaded.model.dispose();
  });
});
