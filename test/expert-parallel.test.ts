/**
 * Expert parallelism (issue 31) on the CPU: W ranks are W worker threads of this process (test/tp/moe-rank.ts,
 * bundled with esbuild) joined by backend-nccl's HostCollectives, as test/tensor-parallel.test.ts runs tensor
 * parallelism. Each rank loads a tiny MoE checkpoint with attention tensor-parallel and E / W experts, routes every
 * token, computes its experts' part and all-reduces (the naive EP dispatch / combine); the greedy tokens must equal
 * one rank's in float32 and each rank must hold only its experts' bytes. Also: a routing that sends every token to
 * one rank's experts (the other rank's dispatch is empty), the divisibility errors, and the CLI's --ep refusals.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UserError } from '@fastkernels/core';
import { checkModelTensorParallel, withExpertParallel } from '@fastkernels/model-zoo';
import { cli } from './helpers.js';
import { bundleRankScript, fixtureModelDir, maxAbsDiff, runRankThreads } from './tp/rank-threads.js';
import type { MoeRankJob, MoeRankResult } from './tp/moe-rank.js';

const here = dirname(fileURLToPath(import.meta.url));
const FIXTURES = join(here, '..', 'packages', 'model-zoo', 'fixtures');
let work: string;
let rankScript: string;

/** A float32 checkpoint of a fixture's config with `over` applied (configOnly: config.json alone, random init at load). */
const modelDir = (name: string, fixture: string, over: Record<string, unknown> = {}, configOnly = false) => fixtureModelDir(work, name, fixture, over, { configOnly, seed: 11 });

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'fk-ep-'));
  rankScript = await bundleRankScript('moe-rank', work);
}, 120_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Run `world` ranks (threads) of a job; resolves with every rank's result, rank order. */
const runRanks = (world: number, job: Omit<MoeRankJob, 'rank' | 'world' | 'shared'>) => runRankThreads<MoeRankJob, MoeRankResult>(rankScript, world, job);

const PROMPTS = [[1, 5, 9, 13, 17, 21, 25], [3, 4]];

describe('expert-parallel MoE on the CPU (W ranks as threads) equals W = 1 in float32', () => {
  // per family: the experts' parameters on one rank ([E, ...] at W = 1) and the down projection's elements per expert
  const H = 64;
  const cases = [
    { name: 'mixtral', fixture: 'tiny-mixtral', over: {}, E: 8, perExpert: { 'block_sparse_moe.experts.w13_weight': 2 * 96 * H, 'block_sparse_moe.experts.w2_weight': H * 96 }, down: H * 96 },
    { name: 'qwen3-moe', fixture: 'tiny-qwen3-moe', over: {}, E: 16, perExpert: { 'mlp.experts.w13_weight': 2 * 32 * H, 'mlp.experts.w2_weight': H * 32 }, down: H * 32 },
    // no checkpoint: host random init, each tensor drawn by its name, so rank r draws exactly its experts' values
    { name: 'mixtral-random-init', configOnly: true, fixture: 'tiny-mixtral', over: {}, E: 8, perExpert: { 'block_sparse_moe.experts.w13_weight': 2 * 96 * H }, down: H * 96 },
    {
      name: 'gpt-oss', fixture: 'tiny-gpt-oss', over: {}, E: 8, down: 32 * H,
      perExpert: { 'mlp.experts.gate_up_proj': H * 64, 'mlp.experts.gate_up_proj_bias': 64, 'mlp.experts.down_proj': 32 * H, 'mlp.experts.down_proj_bias': H },
    },
    {
      name: 'gpt-oss-mxfp4', fixture: 'tiny-gpt-oss', over: { quantization_config: { quant_method: 'mxfp4' } }, E: 8, down: H * (32 / 32) * 16,
      perExpert: { 'mlp.experts.gate_up_proj_blocks': 64 * (H / 32) * 16, 'mlp.experts.gate_up_proj_scales': 64 * (H / 32), 'mlp.experts.down_proj_blocks': H * 16, 'mlp.experts.down_proj_scales': H },
    },
  ];
  for (const c of cases) {
    it(`${c.name}: greedy tokens identical, logits within f32 rounding; each rank holds E / W experts, its own`, async () => {
      const dir = modelDir(c.name, c.fixture, c.over, 'configOnly' in c && c.configOnly);
      const job = { scenario: 'model' as const, model: dir, prompts: PROMPTS, maxTokens: 8 };
      const [single] = await runRanks(1, job);
      expect(single!.tokens!.map((t) => t.length)).toEqual([8, 8]);
      const ranks = await runRanks(2, job);
      for (const r of ranks) {
        expect(r.tokens, `rank ${r.rank}`).toEqual(single!.tokens);
        expect(maxAbsDiff(r.logits!, single!.logits!), `rank ${r.rank}`).toBeLessThan(1e-4);
        // only its experts: E / 2 of every expert tensor (half the bytes), the values of experts [r E / 2, (r + 1) E / 2)
        for (const [name, elements] of Object.entries(c.perExpert)) {
          const full = single!.experts![`model.layers.0.${name}`]!;
          const mine = r.experts![`model.layers.0.${name}`]!;
          expect(full.shape[0], name).toBe(c.E);
          expect(mine.shape, name).toEqual([c.E / 2, ...full.shape.slice(1)]);
          expect(mine.bytes * 2, name).toBe(full.bytes);
          expect(full.bytes / c.E / elements, name).toBe(name.endsWith('_blocks') || name.endsWith('_scales') ? 1 : 4);
        }
        const start = (r.rank * c.E) / 2;
        expect(r.w2).toEqual(single!.w2!.slice(start * c.down, (start + c.E / 2) * c.down));
      }
    }, 180_000);
  }
});

describe('the paged engine under expert parallelism (W = 2 threads) equals W = 1', () => {
  // greedy and seeded sampling, chunked prefill (16-token steps), decode steps replayed from emulated graphs (the EP
  // all-reduce is inside the captured step, as NCCL's is under CUDA graphs)
  const requests = [
    { promptIds: [1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61, 65, 69], params: { maxTokens: 16, ignoreEos: true } },
    { promptIds: [3, 4], params: { maxTokens: 12, temperature: 0.8, topK: 20, seed: 7, ignoreEos: true } },
    { promptIds: [200, 100, 50], params: { maxTokens: 10, ignoreEos: true } },
  ];
  it('qwen3-moe: same tokens, decode graphs replayed on every rank', async () => {
    const dir = modelDir('engine-qwen3-moe', 'tiny-qwen3-moe');
    const [single] = await runRanks(1, { scenario: 'engine', model: dir, requests });
    expect(single!.steps!.graph).toBeGreaterThan(0);
    const ranks = await runRanks(2, { scenario: 'engine', model: dir, requests });
    for (const r of ranks) {
      expect(r.tokens, `rank ${r.rank}`).toEqual(single!.tokens);
      expect(r.steps, `rank ${r.rank}`).toEqual(single!.steps);
    }
  }, 180_000);
});

describe('EP dispatch with a rank that owns none of the routed experts', () => {
  it('every token routed to rank 0\'s experts (rank 1 computes nothing, its part is zero): the all-reduced output equals W = 1, and the reverse', async () => {
    const E = 4;
    const T = 5;
    for (const favoured of [[0, 1], [2, 3]]) {
      // router logits: the favoured experts far ahead for every token
      const logits = Array.from({ length: T * E }, (_, i) => (favoured.includes(i % E) ? 4 + ((i * 7) % 5) * 0.1 : -4));
      const block = { E, K: 2, H: 16, I: 24, T, logits };
      const [single] = await runRanks(1, { scenario: 'block', block });
      const ranks = await runRanks(2, { scenario: 'block', block });
      expect(ranks.map((r) => r.localExperts)).toEqual([{ start: 0, count: 2 }, { start: 2, count: 2 }]);
      for (const r of ranks) {
        expect(r.out!.length).toBe(T * 16);
        r.out!.forEach((v, i) => expect(Math.abs(v - single!.out![i]!), `rank ${r.rank} value ${i}`).toBeLessThan(1e-5));
      }
      expect(single!.out!.some((v) => v !== 0)).toBe(true);
    }
  }, 120_000);
});

describe('expert-parallel sizes', () => {
  it('the experts must split over the ranks; a MoE model over ranks without --ep is refused with the fix', () => {
    const dir = modelDir('odd-experts', 'tiny-qwen3-moe', { num_experts: 6 });
    const check = (world: number, ep: boolean) => () => withExpertParallel(ep, () => checkModelTensorParallel(dir, world));
    expect(check(4, true)).toThrow(UserError);
    expect(check(4, true)).toThrow(/number of experts 6 is not divisible by the expert-parallel size 4 \(.*config\.json: num_experts\)/);
    try {
      check(4, true)();
    } catch (e) {
      expect((e as UserError).details).toMatchObject({ field: '--ep', fix: 'use --ep 1, 2 (sizes that split the experts)' });
    }
    expect(check(2, true)).not.toThrow();
    expect(check(2, false)).toThrow(/qwen3_moe models run over 2 ranks only with expert parallelism/);
  });
});

describe('--ep on generate / e2e / serve: refusals before any rank starts (exit 2); runs need 2 GPUs (expert-parallel.gpu.test.ts)', () => {
  let moe: string;
  let dense: string;
  beforeAll(() => {
    moe = modelDir('cli-moe', 'tiny-mixtral');
    dense = join(work, 'cli-dense');
    mkdirSync(dense, { recursive: true });
    writeFileSync(join(dense, 'config.json'), readFileSync(join(FIXTURES, 'tiny-llama', 'config.json')));
  });
  const generate = (dir: string, ...more: string[]) => cli(['generate', '--model', dir, '--prompt-ids', '1,2,3', '--backend', 'cpu', ...more]);

  it('--ep on a dense model: exit 2 naming --ep, the fix is --tp', () => {
    const r = generate(dense, '--ep', '2');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--ep: .* is a llama model: it has no experts to split/);
    expect(r.stderr).toMatch(/fix: drop --ep \(use --tp 2 for tensor parallelism\)/);
  });

  it('--ep 2 with --tp 4: exit 2, the sizes must be equal', () => {
    const r = generate(moe, '--ep', '2', '--tp', '4');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--ep: --ep 2 with --tp 4: expert parallelism spans the tensor-parallel ranks/);
    expect(r.stderr).toMatch(/fix: use --tp 2 --ep 2/);
  });

  it('--ep 3 on 8 experts (and 4 heads): exit 2 naming the config field; --tp 2 on a MoE model without --ep: exit 2, add --ep 2', () => {
    const odd = modelDir('cli-moe-heads6', 'tiny-mixtral', { num_attention_heads: 6, num_key_value_heads: 3, head_dim: 16 });
    const r = generate(odd, '--ep', '3');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--ep: the number of experts 8 is not divisible by the expert-parallel size 3 \(.*config\.json: num_local_experts\)/);
    expect(r.stderr).toMatch(/fix: use --ep 1, 2, 4, 8/);
    const noEp = generate(moe, '--tp', '2');
    expect(noEp.code).toBe(2);
    expect(noEp.stderr).toMatch(/--tp: mixtral models run over 2 ranks only with expert parallelism/);
    expect(noEp.stderr).toMatch(/fix: add --ep 2/);
  });

  it('--ep 2 alone implies --tp 2: on the CPU backend the tensor-parallel refusal (NCCL needs CUDA); e2e and serve the same', () => {
    const g = generate(moe, '--ep', '2');
    expect(g.code).toBe(2);
    expect(g.stderr).toMatch(/tensor parallelism runs on the cuda backend/);
    const e = cli(['e2e', '--model', moe, '--self-test', '--requests', 'synthetic:2:4-8:2-4:0', '--workload', 'throughput', '--ep', '2', '--backend', 'cpu']);
    expect(e.code).toBe(2);
    expect(e.stderr).toMatch(/tensor parallelism runs on the cuda backend/);
    const s = cli(['serve', '--model', dense, '--ep', '2', '--backend', 'cpu', '--port', '0']);
    expect(s.code).toBe(2);
    expect(s.stderr).toMatch(/--ep: .* has no experts to split/);
  });

  it('--help documents --ep on generate, e2e and serve', () => {
    for (const cmd of ['generate', 'e2e', 'serve']) expect(cli([cmd, '--help']).stdout, cmd).toMatch(/--ep[\s\S]*expert parallelism over the N ranks of --tp N/);
  });
});
