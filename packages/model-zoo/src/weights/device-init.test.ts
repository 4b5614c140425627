/**
 * initWeightsOnDevice (pools tiled by device copies; here on the CPU backend), the fast bf16 encoder of
 * init-weights, and promptLogits (every prompt position's logits through the engine's prefill path).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng, numberToBf16 } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import type { LlamaConfig } from '../families/dense-moe-llm/config.js';
import { llamaArchitecture } from '../families/dense-moe-llm/model.js';
import { baselineRegistry } from '../index.js';
import { generate } from '../engine/generate.js';
import { loadModel, loadModelConfig, weightPlanFor, writeRandomModelCheckpoint } from '../models/load-model.js';
import { promptLogits } from '../engine/prompt-logits.js';
import { encodeValues } from './encode.js';
import { DEVICE_INIT_POOL, poolSegments, poolSize } from './random-init.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');

describe('encodeValues', () => {
  it('bf16 equals core numberToBf16 (one rounding of the float64), ties and specials included', () => {
    const v = new Rng(7).fillNormal(50_000, 0.02);
    const f = new Float32Array(1);
    const u = new Uint32Array(f.buffer);
    for (let i = 0; i < 8000; i++) {
      u[0] = (((i * 2654435761) & 0x7eff0000) | 0x8000) >>> 0; // float32 values on a bf16 tie
      const base = f[0]!;
      v[i] = [base, base * (1 + 2 ** -40), base * (1 - 2 ** -40), -base][i % 4]!;
    }
    v.set([0, -0, 1e-45, 1e-40, 3.4e38, -3.5e38, Infinity, -Infinity], 10_000);
    const got = new Uint16Array(encodeValues(v, 'bf16').buffer);
    const bad = [...v].map((x, i) => [i, numberToBf16(x), got[i]!]).filter(([, a, b]) => a !== b);
    expect(bad).toEqual([]);
  });
  it('f32 is the Float32Array rounding', () => {
    const v = Float64Array.from([1 / 3, -2.5e-8, 1e39]);
    expect([...new Float32Array(encodeValues(v, 'f32').buffer)]).toEqual([...Float32Array.from(v)]);
  });
});

describe('initWeightsOnDevice', () => {
  it('the pool is DEVICE_INIT_POOL long, or the largest tensor when none is that long (never the smallest)', () => {
    const plan = (...shapes: number[][]) => shapes.map((shape) => ({ shape }));
    expect(poolSize(plan([1], [4096], [250_002, 1024], [1024, 1024]))).toBe(DEVICE_INIT_POOL);
    expect(poolSize(plan([1], [64], [96, 32]))).toBe(96 * 32);
    expect(poolSize([])).toBe(1);
    // a big tensor is a handful of tiles, not one per element
    expect(poolSegments({ hfName: 'embeddings.word_embeddings.weight', shape: [250_002, 1024] }, 0, poolSize(plan([1], [250_002, 1024]))).length).toBeLessThan(130);
  });
  for (const name of ['tiny-llama', 'tiny-qwen2']) {
    it(`${name}: every parameter filled at the init scale, seeded, tied embeddings identical`, () => {
      const dir = join(FIXTURES, name);
      const config = loadModelConfig(join(dir, 'config.json')).config as LlamaConfig;
      const load = (seed: number) => loadModel(dir, { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32', randomInit: 'device', initSeed: seed });
      const a = load(3);
      const b = load(3);
      const c = load(4);
      expect(a.weights).toBe('random-device');
      const pa = new Map(a.model.namedParameters());
      const pb = new Map(b.model.namedParameters());
      const pc = new Map(c.model.namedParameters());
      for (const m of weightPlanFor(llamaArchitecture, config, baselineRegistry())) {
        const x = pa.get(m.target)!.narrow(0, m.rowOffset, m.shape[0]!).toFloat64Array();
        const mean = x.reduce((s, y) => s + y, 0) / x.length;
        const sd = Math.sqrt(x.reduce((s, y) => s + (y - mean) ** 2, 0) / x.length);
        if (x.length >= 256) {
          expect(Math.abs(mean - (m.kind === 'norm' ? 1 : 0))).toBeLessThan(config.initializerRange * 0.5);
          expect(sd / config.initializerRange).toBeGreaterThan(0.7);
          expect(sd / config.initializerRange).toBeLessThan(1.3);
        }
        expect([...pb.get(m.target)!.narrow(0, m.rowOffset, m.shape[0]!).toFloat64Array()]).toEqual([...x]);
        expect([...pc.get(m.target)!.narrow(0, m.rowOffset, m.shape[0]!).toFloat64Array()]).not.toEqual([...x]);
      }
      if (config.tieWordEmbeddings) {
        expect([...pa.get('lm_head.linear.weight')!.toFloat64Array()]).toEqual([...pa.get('model.embed_tokens.weight')!.toFloat64Array()]);
      }
      for (const m of [a, b, c]) m.model.dispose();
    });
  }
});

describe('writeRandomModelCheckpoint tiled (init-weights --tiled)', () => {
  for (const name of ['tiny-llama', 'tiny-qwen2']) {
    it(`${name}: the checkpoint loads to exactly the model --random-init device builds`, () => {
      const src = join(FIXTURES, name);
      const { raw } = loadModelConfig(join(src, 'config.json'));
      const out = mkdtempSync(join(tmpdir(), 'fk-tiled-'));
      try {
        writeRandomModelCheckpoint(out, raw, { registry: baselineRegistry(), seed: 5, dtype: 'f32', tiled: true });
        const fromFile = loadModel(out, { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32' });
        const onDevice = loadModel(src, { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32', randomInit: 'device', initSeed: 5 });
        expect(fromFile.weights).toBe('checkpoint');
        const want = new Map(onDevice.model.namedParameters());
        for (const [k, p] of fromFile.model.namedParameters()) expect([...p.toFloat64Array()], k).toEqual([...want.get(k)!.toFloat64Array()]);
        fromFile.model.dispose();
        onDevice.model.dispose();
      } finally {
        rmSync(out, { recursive: true, force: true });
      }
    });
  }
});

describe('promptLogits', () => {
  it("rows are every prompt position's logits; the last equals generate's first-step logits", () => {
    const dir = join(FIXTURES, 'tiny-mistral'); // window 8 < prompt
    const m = loadModel(dir, { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32', initSeed: 2 });
    const prompt = [5, 9, 3, 77, 12, 200, 31, 8, 8, 41, 100, 7, 66];
    const P = prompt.length;
    const V = m.geometry.vocabSize;
    const all = promptLogits(m.model, m.ctx, m.geometry, prompt, { chunkRows: 5 });
    expect(all.length).toBe(P * V);
    const g = generate(m.model, m.ctx, m.geometry, [{ promptIds: prompt }], { maxTokens: 1, collectLogits: true });
    const first = g.outputs[0]!.logits![0]!;
    expect(Math.max(...first.map((x, j) => Math.abs(x - all[(P - 1) * V + j]!)))).toBeLessThan(1e-5);
    // a prefix's logits do not depend on later tokens (causal), so the shorter prompt's rows match
    const pre = promptLogits(m.model, m.ctx, m.geometry, prompt.slice(0, 6));
    expect(Math.max(...pre.map((x, i) => Math.abs(x - all[i]!)))).toBeLessThan(1e-5);
    m.model.dispose();
  });
});
