/**
 * Tensor-parallel Llama, simulated on the CPU: W ranks are W worker threads of this process (test/tp/llama-rank.ts,
 * bundled with esbuild), joined by backend-nccl's HostCollectives (shared memory: blocking all-reduce / all-gather of
 * CPU tensors). Each rank builds the model as rank r of W (QKVParallelLinear, RowParallelLinear, MergedColumn..., a
 * vocab-parallel LM head), reads its slices of the checkpoint, and generates greedily; the tokens must equal the
 * W = 1 run's and the logits match it to float32 rounding. Also: the divisibility errors and `generate --tp`'s
 * refusals (exit 2) through the built CLI.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { HostCollectives, tensorParallelProvider } from '@fastkernels/backend-nccl';
import { TensorParallelGroup, UserError, withTensorParallelGroup } from '@fastkernels/core';
import { baselineRegistry, checkLlamaTensorParallel, loadLlamaModel, parseLlamaConfig, taskProviders, tinyLlamaConfig, writeRandomLlamaCheckpoint } from '@fastkernels/model-zoo';
import { cli } from './helpers.js';
import type { RankJob, RankResult } from './tp/llama-rank.js';

const here = dirname(fileURLToPath(import.meta.url));
const FIXTURES = join(here, '..', 'packages', 'model-zoo', 'fixtures');
const BANNER = "import { createRequire as __fkCreateRequire } from 'node:module'; const require = __fkCreateRequire(import.meta.url);";
let work: string;
let rankScript: string;

/** A model folder: the fixture's config with `over` applied, and a float32 checkpoint unless configOnly. */
function modelDir(name: string, fixture: string, over: Record<string, unknown>, configOnly = false): string {
  const raw = { ...JSON.parse(readFileSync(join(FIXTURES, fixture, 'config.json'), 'utf8')), ...over } as Record<string, unknown>;
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  if (configOnly) writeFileSync(join(dir, 'config.json'), JSON.stringify(raw));
  else writeRandomLlamaCheckpoint(dir, raw, parseLlamaConfig(raw), { seed: 7, dtype: 'f32' });
  return dir;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'fk-tp-'));
  rankScript = join(work, 'llama-rank.mjs');
  await build({
    entryPoints: [join(here, 'tp', 'llama-rank.ts')],
    outfile: rankScript,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['@fastkernels/source'],
    banner: { js: BANNER },
    logLevel: 'warning',
  });
}, 120_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Run `world` ranks (threads) of a job; resolves with every rank's result, rank order. */
async function runRanks(world: number, job: Omit<RankJob, 'rank' | 'world' | 'shared'>): Promise<RankResult[]> {
  const shared = world > 1 ? HostCollectives.shared(world, 1 << 16) : null;
  const workers = Array.from({ length: world }, (_, rank) => new Worker(rankScript, { workerData: { ...job, rank, world, shared } satisfies RankJob }));
  try {
    const results = await Promise.all(
      workers.map((w) => new Promise<RankResult>((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
        w.once('exit', (code) => reject(new Error(`rank thread exited with ${code} before reporting`)));
      })),
    );
    for (const r of results) if (r.error) throw new Error(`rank ${r.rank}: ${r.error}`);
    return results;
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

const maxAbsDiff = (a: number[][][], b: number[][][]) => {
  let m = 0;
  a.forEach((p, i) => p.forEach((row, s) => row.forEach((v, j) => (m = Math.max(m, Math.abs(v - b[i]![s]![j]!))))));
  return m;
};

const PROMPTS = [[1, 5, 9, 13, 17, 21, 25], [3, 4]];

describe('host collectives between threads', () => {
  it('all-reduce (sum, max) and all-gather along the last dim give every rank the same result', async () => {
    const rs = await runRanks(3, { scenario: 'collectives' });
    for (const r of rs) {
      expect(r.collectives!.sum).toEqual([6, 30, -3]);
      expect(r.collectives!.max).toEqual([2, 5]);
      expect(r.collectives!.gatherShape).toEqual([2, 6]);
      expect(r.collectives!.gather).toEqual([0, 0.5, 1, 1.5, 2, 2.5, 0.25, 0.125, 1.25, 1.125, 2.25, 2.125]);
    }
  });
});

describe('tensor-parallel Llama on the CPU (W ranks as threads) equals W = 1', () => {
  const cases = [
    // biases everywhere (o_proj / down_proj biases are added once, on rank 0); W = 4 replicates the 2 kv heads
    { name: 'llama-bias', fixture: 'tiny-llama', over: { attention_bias: true, mlp_bias: true }, worlds: [2, 4], configOnly: false },
    // tied embeddings (the LM head's vocabulary slice is cut from embed_tokens), qkv bias, host random init; the
    // vocabulary 250 splits over 2 ranks but not 4, where the LM head is replicated
    { name: 'qwen2-tied', fixture: 'tiny-qwen2', over: { vocab_size: 250 }, worlds: [2, 4], configOnly: true },
  ];
  for (const c of cases) {
    it(`${c.name}: greedy tokens identical, logits within f32 rounding, at W = ${c.worlds.join(' and ')}`, async () => {
      const dir = modelDir(c.name, c.fixture, c.over, c.configOnly);
      const job = { scenario: 'llama' as const, model: dir, prompts: PROMPTS, maxTokens: 8, ...(c.configOnly ? { randomInit: 'host' as const } : {}) };
      const [single] = await runRanks(1, job);
      expect(single!.tokens!.map((t) => t.length)).toEqual([8, 8]);
      for (const world of c.worlds) {
        const ranks = await runRanks(world, job);
        for (const r of ranks) {
          expect(r.tokens, `rank ${r.rank} of ${world}`).toEqual(single!.tokens);
          expect(maxAbsDiff(r.logits!, single!.logits!), `rank ${r.rank} of ${world}`).toBeLessThan(1e-4);
          // every rank holds the same (all-gathered) logits, bit for bit
          expect(r.logits).toEqual(ranks[0]!.logits);
        }
        // the shards: heads, MLP columns and the vocabulary split; embedding and norms whole
        const s = ranks[1]!.shapes!;
        const kvHeads = Math.max(1, 2 / world);
        expect(s['model.layers.0.self_attn.qkv_proj.weight']).toEqual([(4 / world + 2 * kvHeads) * 16, 64]);
        expect(s['model.layers.0.self_attn.o_proj.weight']).toEqual([64, 64 / world]);
        expect(s['model.layers.0.mlp.gate_up_proj.weight']).toEqual([(2 * 128) / world, 64]);
        expect(s['model.layers.0.mlp.down_proj.weight']).toEqual([64, 128 / world]);
        expect(s['model.embed_tokens.weight']).toEqual([single!.shapes!['model.embed_tokens.weight']![0], 64]);
        const V = single!.shapes!['lm_head.linear.weight']![0]!;
        expect(s['lm_head.linear.weight']).toEqual([V % world === 0 ? V / world : V, 64]);
        expect(s['model.layers.1.input_layernorm.weight']).toEqual([64]);
      }
    }, 120_000);
  }
});

describe('divisibility over the tensor-parallel size', () => {
  const cfg = tinyLlamaConfig({ numAttentionHeads: 4, numKeyValueHeads: 2, intermediateSize: 96 });

  it('heads, kv heads and the MLP size must split; the error names the field and the sizes that work', () => {
    expect(() => checkLlamaTensorParallel(cfg, 3)).toThrow(UserError);
    expect(() => checkLlamaTensorParallel(cfg, 3)).toThrow(/number of attention heads 4 is not divisible by the tensor-parallel size 3 \(config\.json: num_attention_heads\)/);
    expect(() => checkLlamaTensorParallel(tinyLlamaConfig({ numAttentionHeads: 6, numKeyValueHeads: 3 }), 2)).toThrow(/number of kv heads 3 is not divisible by the tensor-parallel size 2 \(config\.json: num_key_value_heads\)/);
    expect(() => checkLlamaTensorParallel(tinyLlamaConfig({ numAttentionHeads: 6, numKeyValueHeads: 2 }), 3)).toThrow(/tensor-parallel size 3 is not a multiple of the number of kv heads 2/);
    expect(() => checkLlamaTensorParallel(tinyLlamaConfig({ intermediateSize: 102 }), 4)).toThrow(/MLP intermediate size 102 is not divisible by the tensor-parallel size 4/);
    try {
      checkLlamaTensorParallel(cfg, 3);
    } catch (e) {
      expect((e as UserError).details).toMatchObject({ field: '--tp', fix: expect.stringMatching(/^use --tp 1, 2, 4 \(/) });
    }
    expect(() => checkLlamaTensorParallel(cfg, 2)).not.toThrow();
    expect(() => checkLlamaTensorParallel(cfg, 4)).not.toThrow(); // 2 kv heads replicated over 4 ranks
  });

  it('loading a model in a group it does not split over is a UserError naming config.json, before anything is built', () => {
    const dir = modelDir('odd', 'tiny-llama', {}, true);
    const registry = baselineRegistry([...taskProviders, tensorParallelProvider]);
    const load = () => withTensorParallelGroup(new TensorParallelGroup(0, 3), () => loadLlamaModel(dir, { backend: new CpuBackend(), registry, dtype: 'f32' }));
    expect(load).toThrow(UserError);
    expect(load).toThrow(new RegExp(`number of attention heads 4 is not divisible by the tensor-parallel size 3 \\(${join(dir, 'config.json').replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: num_attention_heads\\)`));
  });
});

describe('fastkernels generate --tp (refusals here; runs need GPUs: generate.gpu.test.ts in the CLI)', () => {
  it('--tp 3 on a 4-head model: exit 2 naming the field, before any rank starts', () => {
    const dir = modelDir('cli-odd', 'tiny-llama', {}, true);
    const r = cli(['generate', '--model', dir, '--prompt-ids', '1,2,3', '--tp', '3']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--tp: the number of attention heads 4 is not divisible by the tensor-parallel size 3/);
    expect(r.stderr).toMatch(/fix: use --tp 1, 2, 4 \(/);
  });

  it('--tp 2 on the CPU backend: exit 2 (NCCL needs CUDA)', () => {
    const dir = modelDir('cli-cpu', 'tiny-llama', {}, true);
    const r = cli(['generate', '--model', dir, '--prompt-ids', '1,2,3', '--tp', '2', '--backend', 'cpu']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--tp: tensor parallelism runs on the cuda backend/);
  });

  it('--help documents --tp', () => {
    expect(cli(['generate', '--help']).stdout).toMatch(/--tp[\s\S]*one process per GPU/);
  });
});
