import { mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tensor, UserError, elementAccessor } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { parseLlamaConfig, type LlamaConfig } from '../families/dense-moe-llm/config.js';
import { llamaArchitecture } from '../families/dense-moe-llm/model.js';
import { baselineRegistry } from '../index.js';
import { loadModel, weightPlanFor, writeRandomModelCheckpoint } from '../models/load-model.js';
import type { TensorParallelRank } from './weight-plan.js';
import { Checkpoint, SafetensorsFile, writeSafetensors, type WriteEntry } from './safetensors.js';
import { userError } from '../../test/user-error.js';

const tmp = mkdtempSync(join(tmpdir(), 'fk-st-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const FIXTURES = join(import.meta.dirname, '../../fixtures');

function entry(name: string, dtype: WriteEntry['dtype'], shape: number[], values: number[]): WriteEntry {
  return {
    name, dtype, shape,
    bytes: () => {
      const t = Tensor.fromArray(cpuBackend(), values, shape, dtype);
      const b = t.toHostBytes();
      t.dispose();
      return b;
    },
  };
}

/** A raw file from a header object and a data section. */
function rawFile(path: string, header: unknown, data: Uint8Array): void {
  const h = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.byteLength));
  writeFileSync(path, Buffer.concat([len, h, data]));
}

/** The weight plan of a Llama config at a rank (the module tree enumerated on the meta backend). */
const llamaWeightMap = (c: LlamaConfig, tp?: TensorParallelRank) => weightPlanFor(llamaArchitecture, c, baselineRegistry(), tp);

describe('safetensors', () => {
  it('round-trips bf16 / f16 / f32 / i64 tensors with metadata; header 8-byte aligned', () => {
    const p = join(tmp, 'rt.safetensors');
    writeSafetensors(p, [
      entry('a', 'bf16', [2, 3], [1, -2, 0.5, 3.25, 0, -0.125]),
      entry('b', 'f32', [2], [Math.PI, -1e-3]),
      entry('c', 'f16', [1], [65504]),
      entry('d', 'i64', [3], [0, -5, 2 ** 40]),
      entry('empty', 'f32', [0, 4], []),
    ], { format: 'pt', note: 'x' });
    const raw = readFileSync(p);
    expect(Number(raw.readBigUInt64LE(0)) % 8).toBe(0);
    const f = SafetensorsFile.open(p);
    expect(f.metadata).toEqual({ format: 'pt', note: 'x' });
    expect([...f.tensors.keys()]).toEqual(['a', 'b', 'c', 'd', 'empty']);
    const dec = (name: string, dtype: WriteEntry['dtype']) => {
      const b = f.readBytes(name);
      const acc = elementAccessor(dtype, b);
      return Array.from({ length: f.info(name).shape.reduce((x, y) => x * y, 1) }, (_, i) => acc.get(i));
    };
    expect(dec('a', 'bf16')).toEqual([1, -2, 0.5, 3.25, 0, -0.125]);
    expect(dec('b', 'f32')).toEqual([Math.fround(Math.PI), Math.fround(-1e-3)]);
    expect(dec('c', 'f16')).toEqual([65504]);
    expect(dec('d', 'i64')).toEqual([0, -5, 2 ** 40]);
    expect(f.info('a')).toMatchObject({ stDType: 'BF16', dtype: 'bf16', shape: [2, 3] });
    // streaming in small chunks reassembles the same bytes
    const chunks: number[] = [];
    f.stream('a', (b, off) => {
      expect(off).toBe(chunks.length);
      chunks.push(...b);
    }, 8);
    expect(chunks).toEqual([...f.readBytes('a')]);
    f.close();
  });

  it('a truncated file names the file and the tensor that runs past its end', () => {
    const p = join(tmp, 'trunc.safetensors');
    writeSafetensors(p, [entry('w1', 'f32', [4], [1, 2, 3, 4]), entry('w2', 'f32', [4], [5, 6, 7, 8])]);
    truncateSync(p, readFileSync(p).byteLength - 3);
    const e = userError(() => SafetensorsFile.open(p));
    expect(e.message).toContain(p);
    expect(e.message).toMatch(/tensor 'w2' ends at data byte 32 but the file holds 29 bytes of data: the file is truncated/);
    truncateSync(p, 5);
    expect(userError(() => SafetensorsFile.open(p)).message).toMatch(/too short .* truncated/);
    truncateSync(p, 20);
    expect(userError(() => SafetensorsFile.open(p)).message).toMatch(/header length \d+ does not fit/);
  });

  it('validates the header: unknown dtype, byte length vs shape, overlaps, bad JSON, bad entries', () => {
    const p = join(tmp, 'bad.safetensors');
    const data = new Uint8Array(16);
    rawFile(p, { x: { dtype: 'F12', shape: [2], data_offsets: [0, 8] } }, data);
    expect(userError(() => SafetensorsFile.open(p)).message).toMatch(/tensor 'x' has unknown dtype 'F12'/);
    rawFile(p, { x: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, data);
    expect(userError(() => SafetensorsFile.open(p)).message).toMatch(/tensor 'x' \(F32\[3\]\) needs 12 bytes, its data_offsets span 8/);
    rawFile(p, { x: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, y: { dtype: 'F32', shape: [2], data_offsets: [4, 12] } }, data);
    expect(userError(() => SafetensorsFile.open(p)).message).toMatch(/'x' and 'y' overlap/);
    rawFile(p, { x: { dtype: 'F32', shape: [-2], data_offsets: [0, 8] } }, data);
    expect(userError(() => SafetensorsFile.open(p)).message).toMatch(/tensor 'x': shape/);
    rawFile(p, { __metadata__: { a: 1 } }, data);
    expect(userError(() => SafetensorsFile.open(p)).message).toMatch(/__metadata__ must map strings to strings/);
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(3n);
    writeFileSync(p, Buffer.concat([len, Buffer.from('{x:'), Buffer.alloc(4)]));
    expect(userError(() => SafetensorsFile.open(p)).message).toMatch(/not valid JSON/);
  });

  it('reads sharded checkpoints through model.safetensors.index.json', () => {
    const d = join(tmp, 'sharded');
    rmSync(d, { recursive: true, force: true });
    mkdirSync(d);
    writeSafetensors(join(d, 'model-00001-of-00002.safetensors'), [entry('a', 'f32', [2], [1, 2])]);
    writeSafetensors(join(d, 'model-00002-of-00002.safetensors'), [entry('b', 'bf16', [1], [3])]);
    writeFileSync(join(d, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: 10 }, weight_map: { a: 'model-00001-of-00002.safetensors', b: 'model-00002-of-00002.safetensors' } }));
    const c = Checkpoint.open(d);
    expect(c.names().sort()).toEqual(['a', 'b']);
    expect(c.file('b').path).toContain('00002');
    c.close();
    writeFileSync(join(d, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { a: 'model-00002-of-00002.safetensors' } }));
    expect(userError(() => Checkpoint.open(d)).message).toMatch(/maps 'a' to model-00002-of-00002.safetensors, which has no such tensor/);
  });
});

describe('Llama checkpoints: HF names, bad checkpoints', () => {
  const rawCfg = JSON.parse(readFileSync(join(FIXTURES, 'tiny-qwen2', 'config.json'), 'utf8')) as Record<string, unknown>;
  const cfg = parseLlamaConfig(rawCfg);

  it('maps q/k/v and gate/up onto the merged rows; a tied head reads the embedding', () => {
    const map = llamaWeightMap(cfg);
    const qkv = map.filter((m) => m.target === 'model.layers.0.self_attn.qkv_proj.weight').map((m) => [m.hfName, m.rowOffset]);
    expect(qkv).toEqual([['model.layers.0.self_attn.q_proj.weight', 0], ['model.layers.0.self_attn.k_proj.weight', 64], ['model.layers.0.self_attn.v_proj.weight', 96]]);
    expect(map.filter((m) => m.target.endsWith('qkv_proj.bias')).length).toBe(6);
    expect(map.find((m) => m.target === 'lm_head.linear.weight')!.hfName).toBe('model.embed_tokens.weight');
    const gu = map.filter((m) => m.target === 'model.layers.1.mlp.gate_up_proj.weight').map((m) => [m.hfName, m.rowOffset]);
    expect(gu).toEqual([['model.layers.1.mlp.gate_proj.weight', 0], ['model.layers.1.mlp.up_proj.weight', 128]]);
  });

  it('writes HF names only (no lm_head when tied) and loads q_proj into the first rows of qkv_proj', () => {
    const d = join(tmp, 'qwen');
    writeRandomModelCheckpoint(d, rawCfg, { registry: baselineRegistry(), seed: 1, dtype: 'f32' });
    const f = SafetensorsFile.open(join(d, 'model.safetensors'));
    expect(f.tensors.has('lm_head.weight')).toBe(false);
    expect(f.tensors.has('model.layers.0.self_attn.q_proj.bias')).toBe(true);
    expect(f.tensors.size).toBe(1 + 2 * 12 + 1);
    const kBytes = f.readBytes('model.layers.1.self_attn.k_proj.weight');
    f.close();
    const m = loadModel(d, { backend: cpuBackend(), registry: baselineRegistry() });
    const qkv = m.model.namedParameters().find(([k]) => k === 'model.layers.1.self_attn.qkv_proj.weight')![1];
    const rows = qkv.narrow(0, 64, 32);
    expect([...rows.toHostBytes()]).toEqual([...kBytes]);
    rows.dispose();
    m.model.dispose();
  });

  /** Copy the good checkpoint with one tensor changed (or dropped). */
  function variant(name: string, edit: (entries: WriteEntry[]) => WriteEntry[]): string {
    const good = SafetensorsFile.open(join(tmp, 'qwen', 'model.safetensors'));
    const entries: WriteEntry[] = [...good.tensors.values()].map((t) => ({ name: t.name, dtype: t.dtype!, shape: t.shape, bytes: () => good.readBytes(t.name) }));
    const d = join(tmp, name);
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, 'config.json'), JSON.stringify(rawCfg));
    writeSafetensors(join(d, 'model.safetensors'), edit(entries));
    good.close();
    return d;
  }
  const load = (d: string) => loadModel(d, { backend: cpuBackend(), registry: baselineRegistry() });

  it('a missing tensor is named with its expected shape', () => {
    const d = variant('missing', (es) => es.filter((e) => e.name !== 'model.layers.1.mlp.up_proj.weight'));
    const e = userError(() => load(d));
    expect(e.message).toBe(`checkpoint ${d} is missing tensor 'model.layers.1.mlp.up_proj.weight' ([128, 64], for model.layers.1.mlp.gate_up_proj.weight)`);
  });

  it('a wrong shape names the tensor, the file and both shapes', () => {
    const d = variant('shape', (es) => es.map((e) => (e.name === 'model.norm.weight' ? entry(e.name, 'f32', [32], new Array(32).fill(1)) : e)));
    expect(userError(() => load(d)).message).toBe(`tensor 'model.norm.weight' in ${join(d, 'model.safetensors')} has shape [32], expected [64] from the config`);
  });

  it('a non-float dtype is rejected', () => {
    const d = variant('dtype', (es) => es.map((e) => (e.name === 'model.norm.weight' ? entry(e.name, 'i32', [64], new Array(64).fill(1)) : e)));
    expect(userError(() => load(d)).message).toMatch(/tensor 'model.norm.weight' in .* has dtype I32, expected a float dtype/);
  });

  it('unexpected tensors (e.g. a third layer) are named; a tied lm_head.weight and rotary inv_freq are tolerated', () => {
    const d = variant('extra', (es) => [...es, entry('model.layers.2.input_layernorm.weight', 'f32', [64], new Array(64).fill(1))]);
    expect(userError(() => load(d)).message).toMatch(/has tensors the qwen2 config does not use: 'model.layers.2.input_layernorm.weight'/);
    const ok = variant('tolerated', (es) => [...es, entry('lm_head.weight', 'f32', [256, 64], new Array(256 * 64).fill(0)), entry('model.layers.0.self_attn.rotary_emb.inv_freq', 'f32', [8], new Array(8).fill(0))]);
    load(ok).model.dispose();
  });

  it('a truncated checkpoint fails before loading anything, naming file and tensor', () => {
    const d = variant('trunc', (es) => es);
    const p = join(d, 'model.safetensors');
    truncateSync(p, readFileSync(p).byteLength - 100);
    expect(userError(() => load(d)).message).toMatch(/model\.safetensors: tensor '.*' ends at data byte \d+ but the file holds \d+ bytes of data: the file is truncated/);
  });

  it('an untied config over a checkpoint without lm_head.weight suggests tie_word_embeddings', () => {
    const d = variant('untied', (es) => es);
    writeFileSync(join(d, 'config.json'), JSON.stringify({ ...rawCfg, tie_word_embeddings: false }));
    const e = userError(() => load(d));
    expect(e.message).toMatch(/missing tensor 'lm_head.weight'/);
    expect(e.details.fix).toMatch(/tie_word_embeddings/);
  });
});
