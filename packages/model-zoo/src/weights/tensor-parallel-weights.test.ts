/**
 * Loading under tensor parallelism: a rank's weight map names exactly its slice of each checkpoint tensor, the
 * safetensors reader reads only that slice (rows, or a column block row by row), and the KV cache holds the rank's
 * kv heads. (The ranks running the model together, on the CPU, are test/tensor-parallel.test.ts.)
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tensor, TensorParallelGroup, withTensorParallelGroup } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { parseLlamaConfig, type LlamaConfig } from '../families/dense-moe-llm/config.js';
import { llamaArchitecture } from '../families/dense-moe-llm/model.js';
import { baselineRegistry } from '../index.js';
import { weightPlanFor, writeRandomModelCheckpoint } from '../models/load-model.js';
import { kvCacheSpecFor } from '../engine/kv-cache.js';
import { mappedShape, type TensorParallelRank } from './weight-plan.js';
import { SafetensorsFile } from './safetensors.js';

const tmp = mkdtempSync(join(tmpdir(), 'fk-tp-weights-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const raw = JSON.parse(readFileSync(join(import.meta.dirname, '../../fixtures/tiny-llama/config.json'), 'utf8')) as Record<string, unknown>;
const cfg = parseLlamaConfig(raw); // hidden 64, 4 heads, 2 kv heads, head 16, intermediate 128, vocab 256

/** The weight plan of a Llama config at a rank (the module tree enumerated on the meta backend). */
const llamaWeightMap = (c: LlamaConfig, tp?: TensorParallelRank) => weightPlanFor(llamaArchitecture, c, baselineRegistry(), tp);

describe('the weight map of a tensor-parallel rank', () => {
  const byName = (rank: number, world: number) => new Map(llamaWeightMap(cfg, { rank, world }).map((m) => [`${m.hfName}>${m.target}`, m]));

  it('world 1 has no slices (the unsharded map)', () => {
    expect(llamaWeightMap(cfg).every((m) => m.slice === undefined)).toBe(true);
    expect(llamaWeightMap(cfg, { rank: 0, world: 1 })).toEqual(llamaWeightMap(cfg));
  });

  it('rank 1 of 2: heads, MLP rows and columns, the vocabulary of the embedding and the LM head; norms whole', () => {
    const m = byName(1, 2);
    const get = (hf: string, target: string) => m.get(`${hf}>${target}`)!;
    const qkv = 'model.layers.0.self_attn.qkv_proj.weight';
    expect(get('model.layers.0.self_attn.q_proj.weight', qkv)).toMatchObject({ rowOffset: 0, slice: { dim: 0, start: 32, length: 32 } });
    expect(get('model.layers.0.self_attn.k_proj.weight', qkv)).toMatchObject({ rowOffset: 32, slice: { dim: 0, start: 16, length: 16 } });
    expect(get('model.layers.0.self_attn.v_proj.weight', qkv)).toMatchObject({ rowOffset: 48, slice: { dim: 0, start: 16, length: 16 } });
    const o = get('model.layers.0.self_attn.o_proj.weight', 'model.layers.0.self_attn.o_proj.weight');
    expect(o.slice).toEqual({ dim: 1, start: 32, length: 32 });
    expect(mappedShape(o)).toEqual([64, 32]);
    const gu = 'model.layers.0.mlp.gate_up_proj.weight';
    expect(get('model.layers.0.mlp.gate_proj.weight', gu)).toMatchObject({ rowOffset: 0, slice: { dim: 0, start: 64, length: 64 } });
    expect(get('model.layers.0.mlp.up_proj.weight', gu)).toMatchObject({ rowOffset: 64, slice: { dim: 0, start: 64, length: 64 } });
    expect(get('model.layers.0.mlp.down_proj.weight', 'model.layers.0.mlp.down_proj.weight').slice).toEqual({ dim: 1, start: 64, length: 64 });
    expect(get('lm_head.weight', 'lm_head.linear.weight').slice).toEqual({ dim: 0, start: 128, length: 128 });
    const embed = get('model.embed_tokens.weight', 'model.embed_tokens.weight');
    expect(embed).toMatchObject({ rowOffset: 0, slice: { dim: 0, start: 128, length: 128 } });
    expect(mappedShape(embed)).toEqual([128, 64]);
    expect(get('model.norm.weight', 'model.norm.weight').slice).toBeUndefined();
  });

  it('the embedding and the LM head (tied or not) hold the same vocabulary rows; a vocabulary W does not divide keeps both whole', () => {
    const tied = parseLlamaConfig({ ...raw, tie_word_embeddings: true });
    for (const [c, world] of [[cfg, 4], [tied, 2], [tied, 4]] as const) {
      for (let rank = 0; rank < world; rank++) {
        const map = llamaWeightMap(c, { rank, world });
        const embed = map.find((m) => m.target === 'model.embed_tokens.weight')!;
        const head = map.find((m) => m.target === 'lm_head.linear.weight')!;
        expect(head.hfName).toBe(c.tieWordEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight');
        expect(embed.slice).toEqual({ dim: 0, start: (rank * 256) / world, length: 256 / world });
        expect(head.slice).toEqual(embed.slice);
      }
    }
    const odd = parseLlamaConfig({ ...raw, vocab_size: 250, tie_word_embeddings: true }); // 250 = 2 * 125
    expect(llamaWeightMap(odd, { rank: 1, world: 2 }).find((m) => m.target === 'model.embed_tokens.weight')!.slice).toEqual({ dim: 0, start: 125, length: 125 });
    for (const m of llamaWeightMap(odd, { rank: 3, world: 4 }).filter((x) => x.hfName === 'model.embed_tokens.weight')) expect(m.slice).toBeUndefined();
  });

  it('rank 3 of 4: the 2 kv heads are replicated, rank 3 holds kv head 1', () => {
    const k = byName(3, 4).get('model.layers.1.self_attn.k_proj.weight>model.layers.1.self_attn.qkv_proj.weight')!;
    expect(k).toMatchObject({ rowOffset: 16, slice: { dim: 0, start: 16, length: 16 } });
  });

  it('the KV cache of a rank holds its kv heads', () => {
    expect(kvCacheSpecFor(cfg, 'f32', 1).numKvHeads).toBe(2);
    expect(kvCacheSpecFor(cfg, 'f32', 2).numKvHeads).toBe(1);
    expect(kvCacheSpecFor(cfg, 'f32', 4).numKvHeads).toBe(1);
    expect(withTensorParallelGroup(new TensorParallelGroup(1, 2), () => kvCacheSpecFor(cfg, 'bf16').numKvHeads)).toBe(1);
  });
});

describe('SafetensorsFile.readSliceInto reads only a slice, contiguous in its own shape', () => {
  const dir = join(tmp, 'ckpt');
  writeRandomModelCheckpoint(dir, raw, { registry: baselineRegistry(), seed: 2, dtype: 'f32' });
  const f = SafetensorsFile.open(join(dir, 'model.safetensors'));
  afterAll(() => f.close());
  const full = (name: string) => new Float32Array(f.readBytes(name).slice().buffer);
  const cpu = cpuBackend();

  function read(name: string, slice: { dim: number; start: number; length: number }, shape: number[], chunkBytes?: number): number[] {
    const t = Tensor.empty(cpu, shape, 'f32');
    f.readSliceInto(name, slice, cpu, t.storage, 0, chunkBytes);
    return [...t.toFloat64Array()];
  }

  it('rows (dim 0) and a column block (dim 1), in chunks smaller than a row', () => {
    const name = 'model.layers.0.mlp.down_proj.weight'; // [64, 128]
    const all = full(name);
    const rows = read(name, { dim: 0, start: 10, length: 5 }, [5, 128], 96);
    expect(rows).toEqual([...all.subarray(10 * 128, 15 * 128)]);
    const cols = read(name, { dim: 1, start: 64, length: 64 }, [64, 64], 1000);
    expect(cols).toEqual(Array.from({ length: 64 * 64 }, (_, i) => all[Math.floor(i / 64) * 128 + 64 + (i % 64)]!));
    expect(read('model.norm.weight', { dim: 0, start: 32, length: 32 }, [32])).toEqual([...full('model.norm.weight').subarray(32)]);
  });

  it('refuses slices it cannot read', () => {
    const t = Tensor.empty(cpu, [4], 'f32');
    expect(() => f.readSliceInto('model.norm.weight', { dim: 1, start: 0, length: 1 }, cpu, t.storage, 0)).toThrow(/dim 1 are not supported/);
    expect(() => f.readSliceInto('model.norm.weight', { dim: 0, start: 62, length: 4 }, cpu, t.storage, 0)).toThrow(/out of range/);
  });
});
