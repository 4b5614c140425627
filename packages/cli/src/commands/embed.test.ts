import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UserError } from '@fastkernels/core';
import { runEmbed, type EmbedArgs } from './embed.js';

const FIXTURES = join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures');
const tmp = mkdtempSync(join(tmpdir(), 'fk-embed-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const base: Omit<EmbedArgs, 'input'> = { model: join(FIXTURES, 'tiny-bge-m3'), pooling: 'dense', backend: 'cpu', dtype: 'f32', maxNumBatchedTokens: 16384 };

function run(args: EmbedArgs): { out: string; err: string } {
  let out = '';
  let err = '';
  runEmbed(args, { out: (s) => (out += s), err: (s) => (err += s) });
  return { out, err };
}

describe('embed (an encoder model over a JSONL file)', () => {
  it('writes one line per input in order: unit dense vectors, sparse weights, one multi-vector per token after CLS', () => {
    const input = join(tmp, 'in.jsonl');
    writeFileSync(input, '[0, 5, 9, 17, 2]\n{"input_ids": [0, 33, 2]}\n\n[0, 7, 7, 40, 12, 63, 21, 8, 2]\n');
    const out = join(tmp, 'out.jsonl');
    const r = run({ ...base, input, out, pooling: 'dense,sparse,multi-vector' });
    expect(r.err).toMatch(/embedded 3 inputs \(17 tokens, packed\) in 1 batches/);
    const lines = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { index: number; tokens: number; embedding: number[]; sparse: Record<string, number>; multi_vector: number[][] });
    expect(lines.map((l) => [l.index, l.tokens])).toEqual([[0, 5], [1, 3], [2, 9]]);
    for (const l of lines) {
      expect(l.embedding.length).toBe(32);
      expect(Math.hypot(...l.embedding)).toBeCloseTo(1, 5);
      expect(l.multi_vector.length).toBe(l.tokens - 1);
      for (const w of Object.values(l.sparse)) expect(w).toBeGreaterThan(0);
    }
  });

  it('text needs the folder tokenizer; a bad line and a bad pooling are UserErrors naming them', () => {
    const input = join(tmp, 'text.jsonl');
    writeFileSync(input, '{"text": "hello"}\n');
    const e = (() => { try { run({ ...base, input }); } catch (x) { return x; } })() as UserError;
    expect(e).toBeInstanceOf(UserError);
    expect(e.message).toMatch(/text\.jsonl:1: a text input needs the model folder's tokenizer\.json/);
    writeFileSync(input, '[0, -1]\n');
    expect(() => run({ ...base, input })).toThrow(/text\.jsonl:1: expected token ids/);
    expect(() => run({ ...base, input, pooling: 'max' })).toThrow(/unknown pooling 'max'/);
  });
});

describe('embed with text (a folder with tokenizer.json: XLM-R ids and template)', () => {
  it('encodes "<s> text </s>" and gives the vectors of the same ids; sparse weights leave out the special tokens', () => {
    const model = join(FIXTURES, 'tiny-bge-m3-text');
    const input = join(tmp, 'text-in.jsonl');
    writeFileSync(input, '{"text": "Hello world"}\n"Hi"\n[0, 72, 105, 2]\n');
    const r = run({ ...base, model, input, pooling: 'dense,sparse' });
    const lines = r.out.trim().split('\n').map((l) => JSON.parse(l) as { tokens: number; embedding: number[]; sparse: Record<string, number> });
    expect(lines.map((l) => l.tokens)).toEqual([13, 4, 4]);
    lines[1]!.embedding.forEach((v, j) => expect(v).toBeCloseTo(lines[2]!.embedding[j]!, 6));
    for (const l of lines) for (const id of ['0', '1', '2']) expect(l.sparse[id]).toBeUndefined();
  });
});
