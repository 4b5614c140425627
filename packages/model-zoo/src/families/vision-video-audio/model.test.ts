/**
 * The text encoders end to end on the CPU: the registry resolves the fixture configs (T5EncoderModel, CLIPTextModel)
 * to the encoder runner, a seeded random checkpoint in HF's names loads back by path, the runner's batched padded
 * forward matches the float64 reference, and CLIP's pooled end-of-text vector matches it too.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tensor, compareTensors, hostArray, toHostArray } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { userError } from '../../../test/user-error.js';
import { EncoderRunner } from '../../engine/encoder-runner.js';
import { baselineRegistry } from '../../index.js';
import { loadEncoderModel, loadModelConfig, writeRandomModelCheckpoint } from '../../models/load-model.js';
import { SafetensorsFile } from '../../weights/safetensors.js';
import { parseClipTextConfig } from './clip-config.js';
import type { CLIPTextModel } from './L4/clip_text_model.js';
import { clipTextModelReference } from './L4/clip_text_model.js';
import { t5EncoderReference } from './L4/t5_encoder.js';
import { parseT5Config } from './t5-config.js';

const FIXTURES = join(import.meta.dirname, '../../../fixtures');
const tmp = mkdtempSync(join(tmpdir(), 'fk-vva-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const rawOf = (name: string) => JSON.parse(readFileSync(join(FIXTURES, name, 'config.json'), 'utf8')) as Record<string, unknown>;
const tensorNames = (dir: string) => {
  const f = SafetensorsFile.open(join(dir, 'model.safetensors'));
  const names = [...f.tensors.keys()];
  f.close();
  return names;
};
const hostParams = (m: { namedParameters(): [string, Tensor][] }) => new Map(m.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
const mean = (h: Float64Array, S: number, H: number) => {
  const v = new Float64Array(H);
  for (let t = 0; t < S; t++) for (let j = 0; j < H; j++) v[j] = v[j]! + h[t * H + j]! / S;
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
};

describe('T5EncoderModel through the model registry', () => {
  const raw = rawOf('tiny-t5-encoder');
  const cfg = parseT5Config(raw);

  it('resolves to the encoder runner; a random checkpoint in HF names loads back; the runner matches the float64 reference', () => {
    const r = loadModelConfig(join(FIXTURES, 'tiny-t5-encoder', 'config.json'));
    expect(r.architecture.name).toBe('t5-encoder');
    expect(r.architecture.runner).toBe('encoder');
    const dir = join(tmp, 't5');
    const registry = baselineRegistry();
    writeRandomModelCheckpoint(dir, raw, { seed: 7, dtype: 'f32', registry });
    const names = tensorNames(dir);
    for (const n of ['shared.weight', 'encoder.block.0.layer.0.SelfAttention.q.weight', 'encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight', 'encoder.block.1.layer.0.SelfAttention.o.weight', 'encoder.block.1.layer.1.DenseReluDense.wi_0.weight', 'encoder.block.1.layer.1.DenseReluDense.wo.weight', 'encoder.block.0.layer.1.layer_norm.weight', 'encoder.final_layer_norm.weight']) expect(names).toContain(n);
    expect(names).not.toContain('encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight');

    const loaded = loadEncoderModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' });
    expect(loaded.weights).toBe('checkpoint');
    const seqs = [[5, 9, 17, 33, 2, 1], [7, 2], [3, 40, 12, 61, 8, 22, 19, 1, 2]];
    const out = new EncoderRunner(loaded.model, loaded.ctx, { padTokenId: cfg.padTokenId, maxLength: 512 }).embed(seqs, ['mean']);
    const params = hostParams(loaded.model);
    seqs.forEach((s, i) => {
      const h = t5EncoderReference(hostArray([1, s.length], s), null, params, cfg);
      const want = mean(h.data, s.length, cfg.dModel);
      out[i]!.embedding!.forEach((v, j) => expect(v).toBeCloseTo(want[j]!, 5));
    });
    loaded.model.dispose();
  });

  it('config errors name the field', () => {
    expect(userError(() => parseT5Config({ ...raw, feed_forward_proj: 'gated-swish' }, 't5.json')).message).toMatch(/unsupported activation 'swish' of feed_forward_proj/);
    expect(userError(() => parseT5Config({ ...raw, d_model: 0 }, 't5.json')).message).toMatch(/invalid field d_model in t5.json/);
  });
});

describe('CLIPTextModel through the model registry', () => {
  const raw = rawOf('tiny-clip-text');
  const cfg = parseClipTextConfig(raw);

  it('resolves to the encoder runner; checkpoint names are text_model.*; last_hidden_state and pooled match the reference', () => {
    expect(loadModelConfig(join(FIXTURES, 'tiny-clip-text', 'config.json')).architecture.name).toBe('clip-text');
    const dir = join(tmp, 'clip');
    const registry = baselineRegistry();
    writeRandomModelCheckpoint(dir, raw, { seed: 9, dtype: 'f32', registry });
    const names = tensorNames(dir);
    for (const n of ['text_model.embeddings.token_embedding.weight', 'text_model.embeddings.position_embedding.weight', 'text_model.encoder.layers.0.self_attn.q_proj.weight', 'text_model.encoder.layers.1.self_attn.out_proj.bias', 'text_model.encoder.layers.1.mlp.fc1.weight', 'text_model.encoder.layers.0.layer_norm2.bias', 'text_model.final_layer_norm.weight']) expect(names).toContain(n);
    const loaded = loadEncoderModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' });
    const model = loaded.model as unknown as CLIPTextModel;
    // a prompt padded to the max length as FLUX's pipeline does (eos = the largest id, pads after it), no mask
    const ids = [[0, 17, 33, 5, 63, 1, 1, 1], [0, 9, 63, 1, 1, 1, 1, 1]];
    const t = Tensor.fromArray(loaded.ctx.backend, ids.flat(), [2, 8], 'i64');
    const [last, pooled] = model.forward(t, null) as [Tensor, Tensor];
    const [refLast, refPooled] = clipTextModelReference(toHostArray(t), hostParams(model), cfg, null);
    expect(compareTensors(last, refLast!, { atol: 1e-5, rtol: 1e-4 }).status).toBe('PASSED');
    expect(compareTensors(pooled, refPooled!, { atol: 1e-5, rtol: 1e-4 }).status).toBe('PASSED');
    // the pooled row is the eos row of last_hidden_state
    expect([...pooled.toFloat64Array().subarray(0, cfg.hiddenSize)]).toEqual([...last.toFloat64Array().subarray(4 * cfg.hiddenSize, 5 * cfg.hiddenSize)]);
    // the runner: causal + padding mask; a prompt alone or batched gives the same mean vector
    const runner = new EncoderRunner(loaded.model, loaded.ctx, { padTokenId: cfg.padTokenId, maxLength: cfg.maxPositionEmbeddings });
    const seqs = [[0, 17, 33, 5, 63], [0, 9, 63]];
    const out = runner.embed(seqs, ['mean']);
    const params = hostParams(model);
    seqs.forEach((s, i) => {
      const h = clipTextModelReference(hostArray([1, s.length], s), params, cfg, null)[0]!;
      mean(h.data, s.length, cfg.hiddenSize).forEach((v, j) => expect(out[i]!.embedding![j]).toBeCloseTo(v, 5));
    });
    expect(userError(() => runner.embed([new Array(17).fill(5)], ['mean'])).message).toMatch(/17 tokens; the model takes at most 16/);
    for (const x of [t, last, pooled]) x.dispose();
    loaded.model.dispose();
  });
});
