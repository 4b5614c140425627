/**
 * A GLA folder through the commands on the CPU: `generate` (several prompts from a file, one batch) and `serve` (two
 * concurrent completions, continuous batching) give the tokens of each prompt generated alone by the state-in / state-out
 * model (L4/gla with the same checkpoint, greedyGenerateRecurrent): the recurrent state lives in the engine's state pool.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { ExecutionContext, Module } from '@fastkernels/core';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { baselineRegistry, glaWeightRules, greedyGenerateRecurrent, loadWeights, parseGlaConfig, writeRandomModelCheckpoint, type RecurrentCausalLM } from '@fastkernels/model-zoo';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Io } from '../io.js';
import { runGenerate } from './generate.js';
import { startServe } from './serve.js';

const FIXTURE = join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures/tiny-gla');
const tmp = mkdtempSync(join(tmpdir(), 'fk-gla-cli-'));
const dir = join(tmp, 'tiny-gla');
const PROMPTS = [[1, 17, 5, 33, 9], [40, 3], [7, 7, 12, 60, 31, 8, 44, 2, 19, 25, 50]];
const MAX = 6;
let want: number[][] = [];

beforeAll(() => {
  // wide random weights (initializer_range 0.5): clear greedy choices
  const raw = { ...(JSON.parse(readFileSync(join(FIXTURE, 'config.json'), 'utf8')) as Record<string, unknown>), initializer_range: 0.5 };
  writeRandomModelCheckpoint(dir, raw, { registry: baselineRegistry(), seed: 7, dtype: 'f32' });
  const cfg = parseGlaConfig(raw);
  const ctx: ExecutionContext = { backend: new CpuBackend(), device: 0, dtype: 'f32', registry: baselineRegistry() };
  const ref = ctx.registry.createIn<RecurrentCausalLM & Module>(ctx, 'L4/gla', cfg);
  loadWeights(ref, glaWeightRules(cfg), dir);
  want = PROMPTS.map((p) => greedyGenerateRecurrent(ref, ctx, p, MAX));
  ref.dispose();
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('GLA through the CLI on the CPU', () => {
  it('generate --model <gla folder> --prompt-file: every prompt = the recurrent reference', async () => {
    const file = join(tmp, 'prompts.jsonl');
    writeFileSync(file, PROMPTS.map((p) => JSON.stringify({ prompt_ids: p })).join('\n') + '\n');
    let out = '';
    let err = '';
    await runGenerate({ model: dir, promptFile: file, maxTokens: MAX, temperature: 0, topK: 0, topP: 1, seed: 0, backend: 'cpu', dtype: 'f32', json: true, initSeed: 0 }, { out: (s) => (out += s), err: (s) => (err += s) }, []);
    const got = (JSON.parse(out) as { model_type: string; outputs: { token_ids: number[] }[] });
    expect(got.model_type).toBe('gla');
    expect(got.outputs.map((o) => o.token_ids)).toEqual(want);
    expect(new Set(want.flat()).size, 'the continuations are not one token').toBeGreaterThan(3);
  });

  it('serve answers completions; concurrent requests batch and equal the reference', async () => {
    const io: Io = { out: () => {}, err: () => {} };
    const s = await startServe({ model: dir, backend: 'cpu', dtype: 'f32', maxNumSeqs: 4, maxNumBatchedTokens: 8, maxModelLen: 64, gpuMemoryUtilization: 0.9, graphs: true, host: '127.0.0.1', port: 0 }, io);
    try {
      const post = (prompt: number[][] | number[]) =>
        fetch(`http://127.0.0.1:${s.address.port}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt, max_tokens: MAX, temperature: 0, ignore_eos: true }), signal: AbortSignal.timeout(30_000) })
          .then((r) => r.json() as Promise<{ choices: { token_ids: number[]; finish_reason: string }[] }>);
      const [a, b] = await Promise.all([post(PROMPTS[0]!), post([PROMPTS[1]!, PROMPTS[2]!])]);
      expect(a.choices[0]!.token_ids).toEqual(want[0]);
      expect(a.choices[0]!.finish_reason).toBe('length');
      expect(b.choices.map((c) => c.token_ids)).toEqual([want[1], want[2]]);
    } finally {
      await s.stop();
    }
  });
});
