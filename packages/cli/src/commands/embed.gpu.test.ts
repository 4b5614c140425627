/**
 * BGE-M3 on CUDA (tag gpu): the tiny fixture's seeded random weights embedded by `embed` on the CUDA backend and on
 * the CPU (float64 internally), f32: dense vectors and ColBERT multi-vectors agree to cosine >= 0.99999 (issue 35's fp32
 * parity bar, here against our CPU oracle; HF parity at the real widths is the bench/reference follow-up), and bf16 to
 * cosine >= 0.999. The fixture's config travels as a JSON import (the GPU host has no checkout).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import config from '../../../model-zoo/fixtures/tiny-bge-m3/config.json' with { type: 'json' };
import { runEmbed } from './embed.js';

const dir = join(mkdtempSync(join(tmpdir(), 'fk-embed-gpu-')), 'tiny-bge-m3');
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
const input = join(dir, '..', 'in.jsonl');
const lens = [5, 38, 17, 2, 30, 9, 24, 11];
writeFileSync(input, lens.map((n, i) => JSON.stringify([0, ...Array.from({ length: n - 2 }, (_, j) => 4 + ((i * 13 + j * 7) % 60)), 2])).join('\n') + '\n');

type Line = { embedding: number[]; multi_vector: number[][] };
function embedOn(backend: string, dtype: string): Line[] {
  let out = '';
  runEmbed({ model: dir, input, pooling: 'dense,multi-vector', backend, dtype, maxBatchTokens: 96 }, { out: (s) => (out += s), err: () => {} });
  return out.trim().split('\n').map((l) => JSON.parse(l) as Line);
}
const cosine = (a: number[], b: number[]) => {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) (ab += a[i]! * b[i]!), (aa += a[i]! ** 2), (bb += b[i]! ** 2);
  return ab / Math.sqrt(aa * bb);
};

describe('embed on CUDA vs the CPU', () => {
  for (const [dtype, bar] of [['f32', 0.99999], ['bf16', 0.999]] as const) {
    it(`${dtype}: dense and multi-vector cosine >= ${bar}`, { tags: ['gpu'], timeout: 120_000 }, () => {
      const cpu = embedOn('cpu', dtype);
      const gpu = embedOn('cuda', dtype);
      cpu.forEach((c, i) => {
        expect(cosine(gpu[i]!.embedding, c.embedding)).toBeGreaterThanOrEqual(bar);
        expect(gpu[i]!.multi_vector.length).toBe(c.multi_vector.length);
        c.multi_vector.forEach((v, t) => expect(cosine(gpu[i]!.multi_vector[t]!, v)).toBeGreaterThanOrEqual(bar));
      });
    });
  }
});
