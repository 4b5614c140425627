/**
 * Tensor-parallel Llama, simulated on the CPU: W ranks are W worker threads of this process (test/tp/llama-rank.ts,
 * bundled with esbuild), joined by backend-nccl's HostCollectives (shared memory: blocking all-reduce / all-gather of
 * CPU tensors). Each rank builds the model as rank r of W (QKVParallelLinear, RowParallelLinear, MergedColumn..., a
 * vocab-parallel LM head), reads its slices of the checkpoint, and generates greedily; the tokens must equal the
 * W = 1 run's and the logits match it to float32 rounding. Also: the divisibility errors and `generate --tp`'s
 * refusals (exit 2) through the built CLI.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { HostCollectives } from '@fastkernels/backend-nccl';
import { TensorParallelGroup, UserError, withTensorParallelGroup } from '@fastkernels/core';
import { baselineRegistry, checkLlamaTensorParallel, loadModel, taskProviders, tensorParallelProvider, tinyLlamaConfig } from '@fastkernels/model-zoo';
import { cli } from './helpers.js';
import { bundleRankScript, fixtureModelDir, maxAbsDiff, runRankThreads } from './tp/rank-threads.js';
import type { EngineJob, EngineOp, RankJob, RankResult, ServeMessage } from './tp/llama-rank.js';

let work: string;
let rankScript: string;

/** A float32 checkpoint of a fixture's config with `over` applied (configOnly: config.json alone, random init at load). */
const modelDir = (name: string, fixture: string, over: Record<string, unknown> = {}, configOnly = false) => fixtureModelDir(work, name, fixture, over, { configOnly, seed: 7 });

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'fk-tp-'));
  rankScript = await bundleRankScript('llama-rank', work);
}, 120_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Run `world` ranks (threads) of a job; resolves with every rank's result, rank order. */
const runRanks = (world: number, job: Omit<RankJob, 'rank' | 'world' | 'shared'>) => runRankThreads<RankJob, RankResult>(rankScript, world, job);

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
        // the shards: heads, MLP columns and the vocabulary (embedding and LM head) split; norms whole
        const s = ranks[1]!.shapes!;
        const kvHeads = Math.max(1, 2 / world);
        expect(s['model.layers.0.self_attn.qkv_proj.weight']).toEqual([(4 / world + 2 * kvHeads) * 16, 64]);
        expect(s['model.layers.0.self_attn.o_proj.weight']).toEqual([64, 64 / world]);
        expect(s['model.layers.0.mlp.gate_up_proj.weight']).toEqual([(2 * 128) / world, 64]);
        expect(s['model.layers.0.mlp.down_proj.weight']).toEqual([64, 128 / world]);
        const V = single!.shapes!['lm_head.linear.weight']![0]!;
        const split = V % world === 0;
        expect(s['model.embed_tokens.weight']).toEqual([split ? V / world : V, 64]);
        expect(s['lm_head.linear.weight']).toEqual([split ? V / world : V, 64]);
        // each rank's embedding holds its rows of the checkpoint's table (the whole table when W does not divide V);
        // a tied LM head holds the same rows
        for (const r of ranks) {
          const rows = split ? V / world : V;
          const start = split ? r.rank * rows : 0;
          expect(r.tables!.embed, `rank ${r.rank} of ${world}: embedding rows`).toEqual(single!.tables!.embed.slice(start * 64, (start + rows) * 64));
          expect(r.tables!.head, `rank ${r.rank} of ${world}: LM head rows`).toEqual(single!.tables!.head.slice(start * 64, (start + rows) * 64));
          if (c.name === 'qwen2-tied') expect(r.tables!.head).toEqual(r.tables!.embed);
        }
        expect(s['model.layers.1.input_layernorm.weight']).toEqual([64]);
      }
    }, 120_000);
  }
});

describe('VocabParallelEmbedding on W ranks (threads): the masked gathers all-reduced equal the replicated table bit for bit', () => {
  const V = 96;
  const H = 40;
  /** Fresh random ids plus the first and last id of every shard of `world`. */
  const idsFor = (world: number, seed: number) => {
    let x = seed;
    const ids = Array.from({ length: 20 }, () => (x = (x * 1103515245 + 12345) % 2 ** 31) % V);
    for (let r = 0; r < world; r++) ids.push((r * V) / world, ((r + 1) * V) / world - 1);
    return ids;
  };
  for (const dtype of ['f32', 'bf16'] as const) {
    it(`${dtype}: W = 2 and 4 equal W = 1; each rank holds [V / W, H] and reduces through the registry's L1/allreduce`, async () => {
      for (const world of [2, 4]) {
        const embedding = { V, H, dtype, seed: 3, ids: idsFor(world, world) };
        const [single] = await runRanks(1, { scenario: 'embedding', embedding });
        expect(single!.embedding!).toMatchObject({ shape: [embedding.ids.length, H], start: 0, rows: V, allReduceChild: false });
        expect(single!.embedding!.values.some((v) => v !== 0)).toBe(true);
        const ranks = await runRanks(world, { scenario: 'embedding', embedding });
        for (const r of ranks) {
          expect(r.embedding!.values, `rank ${r.rank} of ${world}`).toEqual(single!.embedding!.values);
          expect(r.embedding!).toMatchObject({ shape: [embedding.ids.length, H], start: (r.rank * V) / world, rows: V / world, allReduceChild: true });
        }
      }
    }, 120_000);
  }

  it('a vocabulary W does not divide (V = 98, W = 4) stays replicated on every rank', async () => {
    const embedding = { V: 98, H: 24, dtype: 'f32' as const, seed: 4, ids: [0, 24, 25, 48, 49, 73, 74, 97, 13] };
    const [single] = await runRanks(1, { scenario: 'embedding', embedding });
    const ranks = await runRanks(4, { scenario: 'embedding', embedding });
    for (const r of ranks) {
      expect(r.embedding!).toMatchObject({ start: 0, rows: 98, allReduceChild: false });
      expect(r.embedding!.values).toEqual(single!.embedding!.values);
    }
  }, 120_000);
});

describe('e2e --tp on the CPU: W ranks running the paged engine (SPMD) equal W = 1', () => {
  // 4 requests, greedy and seeded sampling, chunked prefill (16-token steps), few KV blocks (preemption)
  const requests = [
    { promptIds: [1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61, 65, 69], params: { maxTokens: 24, ignoreEos: true } },
    { promptIds: [3, 4], params: { maxTokens: 20, temperature: 0.8, topK: 20, seed: 7, ignoreEos: true } },
    { promptIds: [200, 100, 50], params: { maxTokens: 16, temperature: 1, topP: 0.9, seed: 11, ignoreEos: true } },
    { promptIds: [8], params: { maxTokens: 30, ignoreEos: true } },
  ];
  const engineJob = (over: Partial<EngineJob> = {}): EngineJob => ({
    requests, maxNumSeqs: 4, maxNumBatchedTokens: 16, maxModelLen: 64, numKvBlocks: [12, 12], graphs: 'emulated', ...over,
  });
  let dir: string;
  beforeAll(() => {
    dir = modelDir('engine-llama', 'tiny-llama', { attention_bias: true });
  });

  it('same tokens (greedy and sampled, with preemptions) as W = 1, decode graphs replayed; the ranks settle on the smallest KV block count', async () => {
    const [single] = await runRanks(1, { scenario: 'engine', model: dir, engine: engineJob({ numKvBlocks: [6] }) });
    expect(single!.engine!.graphSteps).toBeGreaterThan(0);
    const ranks = await runRanks(2, { scenario: 'engine', model: dir, engine: engineJob({ numKvBlocks: [12, 6] }) });
    for (const r of ranks) {
      expect(r.tokens, `rank ${r.rank}`).toEqual(single!.tokens);
      expect(r.engine!.numKvBlocks).toBe(6);
      expect(r.engine!.graphSteps).toBe(single!.engine!.graphSteps);
      expect(r.engine!.graphFallback).toBeNull();
    }
    expect(ranks[0]!.engine!.limitedBy).toBe('ranks'); // rank 0 had room for 12
    expect(ranks[1]!.engine!.limitedBy).toBe('explicit');
  }, 120_000);

  it('a decode-graph capture that fails on one rank: every rank decodes eagerly (reason kept), same tokens', async () => {
    const [single] = await runRanks(1, { scenario: 'engine', model: dir, engine: engineJob({ numKvBlocks: [12], graphs: 'none' }) });
    const ranks = await runRanks(2, { scenario: 'engine', model: dir, engine: engineJob({ graphs: 'fail-rank-1' }) });
    for (const r of ranks) {
      expect(r.tokens, `rank ${r.rank}`).toEqual(single!.tokens);
      expect(r.engine!.graphSteps).toBe(0);
    }
    expect(ranks[1]!.engine!.graphFallback).toMatch(/the decode-graph capture failed on this rank: ncclAllReduce: operation not permitted/);
    expect(ranks[0]!.engine!.graphFallback).toBe('the decode-graph capture failed on another tensor-parallel rank');
  }, 120_000);

  it('a deadline that passes on one rank only: both stop at the same step (the next agreement, every 16 steps)', async () => {
    const ranks = await runRanks(2, { scenario: 'engine', model: dir, engine: engineJob({ pastDeadlineOnRank: 0 }) });
    for (const r of ranks) {
      expect(r.engine!.error, `rank ${r.rank}`).toMatch(/^EngineTimeoutError: the run passed its deadline/);
      expect(r.engine!.timedOutAtStep, `rank ${r.rank}`).toBe(16);
    }
  }, 120_000);

  it('E2eRunner: the self-test agrees 100%, and every rank drops the same candidates as W = 1 (runtime, compile, incorrect)', async () => {
    const self = await runRanks(2, { scenario: 'e2e', model: dir });
    for (const r of self) {
      expect(r.e2e!.outcome).toBe('ok');
      expect(r.e2e!.discrepancies).toEqual([0, 0, 0, 0, 0, 0]);
      expect(r.e2e!.drops).toEqual([]);
    }
    const job = { scenario: 'e2e' as const, model: dir, candidates: ['good-linear', 'wrong-silu', 'throwing-rotary', 'uncapturable-embedding'] };
    const [single] = await runRanks(1, job);
    expect(single!.e2e!.drops).toEqual([['L1/rotary_emb', 'runtime'], ['L1/embedding', 'compile'], ['L1/silu_and_mul', 'incorrect']]);
    const ranks = await runRanks(2, job);
    for (const r of ranks) {
      expect(r.e2e!.drops, `rank ${r.rank}`).toEqual(single!.e2e!.drops);
      expect(r.e2e!.outcome).toBe('ok');
      expect(r.e2e!.discrepancies).toEqual(ranks[0]!.e2e!.discrepancies);
      expect(r.e2e!.runs).toBe(single!.e2e!.runs); // the same bisection
    }
    // the uncapturable candidate: the baseline captured, so the rank's eager fallback is the candidate's compile failure
    expect(ranks[0]!.e2e!.log.some((l) => /dropping L1\/embedding \(compile, from the error\)/.test(l))).toBe(true);
  }, 180_000);
});

describe('serve --tp on the CPU: rank 0 serves HTTP, every rank\'s engine follows its control messages', () => {
  let dir: string;
  beforeAll(() => {
    dir = modelDir('serve-llama', 'tiny-llama', { attention_bias: true });
  });

  /** Start the ranks of a serve run; `port` resolves when rank 0 listens, `stop()` shuts it down and returns every rank's result. */
  function serveRanks(world: number, job: Omit<RankJob, 'rank' | 'world' | 'shared'>) {
    const shared = HostCollectives.shared(world, 1 << 16);
    const workers = Array.from({ length: world }, (_, rank) => new Worker(rankScript, { workerData: { ...job, rank, world, shared } satisfies RankJob }));
    let gotPort!: (p: number) => void;
    const port = new Promise<number>((ok) => (gotPort = ok));
    const results = Promise.all(workers.map((w) => new Promise<RankResult>((resolve, reject) => {
      w.on('message', (m: ServeMessage) => {
        if ('kind' in m) gotPort(m.port);
        else resolve(m);
      });
      w.once('error', reject);
      w.once('exit', (code) => reject(new Error(`rank thread exited with ${code} before reporting`)));
    })));
    results.catch(() => gotPort(-1));
    return {
      port,
      results,
      stop: async () => {
        workers[0]!.postMessage('stop');
        try {
          const rs = await results;
          for (const r of rs) if (r.error) throw new Error(`rank ${r.rank}: ${r.error}`);
          return rs;
        } finally {
          await Promise.all(workers.map((w) => w.terminate()));
        }
      },
    };
  }

  type Completion = { choices: { index: number; token_ids: number[]; finish_reason: string }[] };

  /** A streamed completion: the tokens as they arrive; `cancelAfter` events, the client goes away. */
  async function streamed(url: string, body: Record<string, unknown>, cancelAfter?: number, onEvent?: (n: number) => void): Promise<{ tokens: number[]; cancelled: boolean }> {
    const ac = new AbortController();
    const r = await fetch(url, { method: 'POST', body: JSON.stringify({ ...body, stream: true }), signal: ac.signal });
    const reader = r.body!.getReader();
    const tokens: number[] = [];
    let buf = '';
    let events = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { tokens, cancelled: false };
      buf += new TextDecoder().decode(value);
      let k: number;
      while ((k = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, k);
        buf = buf.slice(k + 2);
        if (ev === 'data: [DONE]') continue;
        const j = JSON.parse(ev.slice(6)) as Completion & { error?: unknown };
        if (j.error) throw new Error(JSON.stringify(j.error));
        tokens.push(...j.choices[0]!.token_ids);
        events++;
        onEvent?.(events);
        if (cancelAfter !== undefined && events >= cancelAfter) {
          ac.abort();
          await reader.cancel().catch(() => {});
          return { tokens, cancelled: true };
        }
      }
    }
  }

  it('requests arriving at different times (a cancellation, an idle spell past the collectives\' deadline): every rank makes the same engine calls and tokens, equal to one engine replaying them; rank 0 answers them', async () => {
    const job = {
      scenario: 'serve' as const, model: dir, collectiveTimeoutMs: 3000,
      engine: { requests: [], maxNumSeqs: 4, maxNumBatchedTokens: 16, maxModelLen: 64, numKvBlocks: [8, 8], graphs: 'emulated' as const },
    };
    const run = serveRanks(2, job);
    const port = await run.port;
    expect(port).toBeGreaterThan(0);
    const url = `http://127.0.0.1:${port}/v1/completions`;
    const post = async (body: Record<string, unknown>) => (await (await fetch(url, { method: 'POST', body: JSON.stringify(body) })).json()) as Completion;

    // A streams; B, C and D arrive while A runs (C is cancelled by its client after 2 tokens); E after an idle spell
    const P = { a: [1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61, 65, 69], b: [[3, 4], [200, 100, 50]], c: [8], d: [77, 78, 79], e: [11, 12, 13, 14] };
    let third!: () => void;
    const aRunning = new Promise<void>((ok) => (third = ok));
    const a = streamed(url, { prompt: P.a, max_tokens: 40, temperature: 0, ignore_eos: true }, undefined, (n) => n === 3 && third());
    await aRunning;
    const [b, c, d] = await Promise.all([
      post({ prompt: P.b, max_tokens: 12, temperature: 0.8, top_k: 20, seed: 7, ignore_eos: true }),
      streamed(url, { prompt: P.c, max_tokens: 50, temperature: 0, ignore_eos: true }, 2),
      // logprobs travel in the control message: every rank takes the same eager steps for them
      new Promise((r) => setTimeout(r, 20)).then(() => post({ prompt: P.d, max_tokens: 6, temperature: 1, top_p: 0.9, seed: 3, stop_token_ids: [5], logprobs: 2 })),
    ]);
    const aDone = await a;
    await new Promise((r) => setTimeout(r, 3500)); // idle: longer than the collectives' 3 s deadline
    const e = await post({ prompt: P.e, max_tokens: 5, temperature: 0 });
    const [r0, r1] = await run.stop();

    // the same engine calls on every rank, in the same order; arrivals between steps; the cancellation is in it
    expect(r1!.serve!.trace).toEqual(r0!.serve!.trace);
    const trace = r0!.serve!.trace;
    const kinds = trace.map((op) => op[0]).join(' ');
    expect(kinds).toMatch(/^add step( step)* add/); // later requests joined a running batch or an idle engine after steps
    expect(trace.some((op) => op[0] === 'abort'), kinds).toBe(true);
    expect(c.cancelled).toBe(true);
    expect(r1!.serve!.outputs).toEqual(r0!.serve!.outputs);

    // one engine (world 1) replaying rank 0's calls: the same tokens
    const [single] = await runRanks(1, { scenario: 'serve-replay', model: dir, trace, engine: { ...job.engine, numKvBlocks: [8] } });
    expect(single!.serve!.outputs).toEqual(r0!.serve!.outputs);

    // the HTTP answers are those tokens
    const idOf = (p: number[]) => (trace.find((op) => op[0] === 'add' && op[2].join() === p.join()) as Extract<EngineOp, ['add', ...unknown[]]>)[1];
    const out = r0!.serve!.outputs;
    expect(aDone.tokens).toEqual(out[idOf(P.a)]);
    expect(aDone.tokens).toHaveLength(40);
    expect(b.choices.map((x) => x.token_ids)).toEqual([out[idOf(P.b[0]!)], out[idOf(P.b[1]!)]]);
    expect(d.choices[0]!.token_ids).toEqual(out[idOf(P.d)]);
    expect((d.choices[0] as unknown as { logprobs: { token_logprobs: number[] } }).logprobs.token_logprobs).toHaveLength(out[idOf(P.d)]!.length);
    expect(e.choices[0]!.token_ids).toEqual(out[idOf(P.e)]);
    expect(out[idOf(P.c)]).toBeUndefined(); // cancelled: never finished
  }, 180_000);
});

describe('bench --tp on the CPU: L1/allreduce in lockstep on W ranks (what each group worker runs)', () => {
  it('the baseline against itself passes on every rank, the float64 reference being the sum of every rank\'s input', async () => {
    const ranks = await runRanks(2, { scenario: 'bench-allreduce', allreduce: 'baseline' });
    for (const r of ranks) {
      expect(r.bench!.map((x) => x.status), `rank ${r.rank}`).toEqual(['PASSED', 'PASSED']);
      for (const x of r.bench!) {
        expect(x.golden?.baseline.status).toBe('PASSED');
        expect(x.checks).toContain('hidden-shape');
        expect(x.speedup).toBeGreaterThan(0);
      }
    }
  }, 120_000);

  it('a candidate that does not communicate (a copy: right at world 1) is INCORRECT_NUMERICAL on every rank', async () => {
    const [one] = await runRanks(1, { scenario: 'bench-allreduce', allreduce: 'copy' });
    expect(one!.bench!.map((x) => x.status)).toEqual(['PASSED', 'PASSED']);
    const ranks = await runRanks(2, { scenario: 'bench-allreduce', allreduce: 'copy' });
    for (const r of ranks) expect(r.bench!.map((x) => x.status), `rank ${r.rank}`).toEqual(['INCORRECT_NUMERICAL', 'INCORRECT_NUMERICAL']);
  }, 120_000);
});

describe('bench --tp on the CPU: the L2 parallel linear layers in lockstep, each rank its shard of one seeded layer', () => {
  const ids = ['L2/column_parallel_linear', 'L2/row_parallel_linear', 'L2/qkv_parallel_linear', 'L2/merged_column_parallel_linear'];
  for (const id of ids) {
    it(`${id}: the baseline against itself passes on every rank at W = 2 and 4, against the full layer's float64 output`, async () => {
      for (const world of [2, 4]) {
        const ranks = await runRanks(world, { scenario: 'bench-linear', linear: { task: id, candidate: 'baseline' } });
        for (const r of ranks) {
          const what = `rank ${r.rank} of ${world}`;
          expect(r.bench!.map((x) => x.status), what).toEqual(['PASSED', 'PASSED']);
          for (const x of r.bench!) {
            // the golden check ran, and the baseline's shard output is the right slice of the unsharded layer's
            expect(x.golden?.baseline.status, `${what} ${x.case}: ${x.golden?.baseline.detail}`).toBe('PASSED');
            expect(x.golden?.candidate.status, what).toBe('PASSED');
            expect(x.checks, what).toEqual(expect.arrayContaining(['golden-f64', 'hidden-shape']));
            expect(x.speedup, what).toBeGreaterThan(0);
          }
        }
      }
    }, 120_000);
  }

  it('a row-parallel linear that skips the all-reduce (right at world 1) is INCORRECT_NUMERICAL on every rank', async () => {
    const job = { scenario: 'bench-linear' as const, linear: { task: 'L2/row_parallel_linear', candidate: 'no-all-reduce' as const } };
    const [one] = await runRanks(1, job);
    expect(one!.bench!.map((x) => x.status)).toEqual(['PASSED', 'PASSED']);
    for (const world of [2, 4]) {
      const ranks = await runRanks(world, job);
      for (const r of ranks) {
        const what = `rank ${r.rank} of ${world}`;
        expect(r.bench!.map((x) => x.status), what).toEqual(['INCORRECT_NUMERICAL', 'INCORRECT_NUMERICAL']);
        for (const x of r.bench!) {
          expect(x.detail, what).not.toMatch(/another rank/); // each rank saw it itself, not only through the agreement
          expect([x.golden?.baseline.status, x.golden?.candidate.status], what).toEqual(['PASSED', 'INCORRECT_NUMERICAL']);
        }
      }
    }
  }, 120_000);
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
    const load = () => withTensorParallelGroup(new TensorParallelGroup(0, 3), () => loadModel(dir, { backend: new CpuBackend(), registry, dtype: 'f32' }));
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

describe('e2e --tp and bench --tp: refusals before any rank starts (exit 2); runs need GPUs: tensor-parallel.gpu.test.ts', () => {
  const e2e = (dir: string, ...more: string[]) => cli(['e2e', '--model', dir, '--self-test', '--requests', 'synthetic:2:4-8:2-4:0', '--workload', 'throughput', ...more]);

  it('e2e --tp 3 on a 4-head model: exit 2 naming the field and the sizes that work', () => {
    const r = e2e(modelDir('e2e-odd', 'tiny-llama', {}, true), '--tp', '3', '--backend', 'cpu');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--tp: the number of attention heads 4 is not divisible by the tensor-parallel size 3/);
    expect(r.stderr).toMatch(/fix: use --tp 1, 2, 4 \(/);
  });

  it('e2e --tp 2 on the CPU backend, and with device random init: exit 2 with the fix', () => {
    const dir = modelDir('e2e-cpu', 'tiny-llama', {}, true);
    const cpu = e2e(dir, '--tp', '2', '--backend', 'cpu');
    expect(cpu.code).toBe(2);
    expect(cpu.stderr).toMatch(/--tp: tensor parallelism runs on the cuda backend/);
    const dev = e2e(dir, '--tp', '2', '--backend', 'cpu', '--random-init', 'device');
    expect(dev.code).toBe(2);
    expect(dev.stderr).toMatch(/--random-init: device random init cannot be sharded over ranks/);
  });

  it('e2e --tp 2 with a candidate file that does not load: exit 2 naming the file (checked once, in the parent)', () => {
    const dir = modelDir('e2e-cand', 'tiny-llama', {}, true);
    const cands = join(work, 'bad-cands');
    mkdirSync(join(cands, 'L1'), { recursive: true });
    writeFileSync(join(cands, 'L1', 'rms_norm.ts'), 'export class NotRMSNorm {}\n');
    const r = cli(['e2e', '--model', dir, '--candidates', cands, '--tp', '2', '--backend', 'cpu']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/rms_norm\.ts/);
  });

  it('inside a launch of another size: exit 2', () => {
    const dir = modelDir('e2e-launch', 'tiny-llama', {}, true);
    const r = cli(['e2e', '--model', dir, '--self-test', '--tp', '2', '--backend', 'cpu'], { env: { RANK: '0', WORLD_SIZE: '4', MASTER_PORT: '1', FASTKERNELS_RDZV_TOKEN: 't' } });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--tp 2 inside a launch of 4 ranks/);
  });

  it('bench --tp 2 on the CPU backend: exit 2; without --tp the all-reduce is skipped with the way to run it', () => {
    const r = cli(['bench', '--self-test', '--task', 'allreduce', '--tp', '2', '--backend', 'cpu', '--iters', '0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--tp: tensor parallelism runs on the cuda backend/);
    const skipped = cli(['bench', '--self-test', '--task', 'allreduce', '--backend', 'cpu', '--iters', '0', '--json']);
    expect(skipped.code).toBe(0);
    expect(skipped.stderr).toContain('bench: skipping L1/allreduce: needs a process group of world size 2; run `node packages/cli/dist/bin.js bench --tp 2`'); // hints name the CLI as run
  });

  it('serve --tp: the same refusals (divisibility, cpu backend, device random init) before any rank starts; --help documents it', () => {
    const dir = modelDir('serve-refuse', 'tiny-llama', {}, true);
    const odd = cli(['serve', '--model', dir, '--tp', '3', '--backend', 'cpu', '--port', '0']);
    expect(odd.code).toBe(2);
    expect(odd.stderr).toMatch(/--tp: the number of attention heads 4 is not divisible by the tensor-parallel size 3/);
    const cpu = cli(['serve', '--model', dir, '--tp', '2', '--backend', 'cpu', '--port', '0']);
    expect(cpu.code).toBe(2);
    expect(cpu.stderr).toMatch(/--tp: tensor parallelism runs on the cuda backend/);
    const dev = cli(['serve', '--model', dir, '--tp', '2', '--backend', 'cpu', '--random-init', 'device', '--port', '0']);
    expect(dev.code).toBe(2);
    expect(dev.stderr).toMatch(/--random-init: device random init cannot be sharded over ranks/);
    const launched = cli(['serve', '--model', dir, '--tp', '2', '--backend', 'cpu'], { env: { RANK: '0', WORLD_SIZE: '4', MASTER_PORT: '1', FASTKERNELS_RDZV_TOKEN: 't' } });
    expect(launched.code).toBe(2);
    expect(launched.stderr).toMatch(/--tp 2 inside a launch of 4 ranks/);
    expect(cli(['serve', '--help']).stdout).toMatch(/--tp[\s\S]*one process per GPU[\s\S]*Rank 0 serves HTTP/);
  });

  it('--help documents --tp for e2e and bench', () => {
    expect(cli(['e2e', '--help']).stdout).toMatch(/--tp[\s\S]*rank runs the whole evaluation on its shard of the model/);
    expect(cli(['bench', '--help']).stdout).toMatch(/--tp[\s\S]*bench\s+workers form an NCCL group/);
  });
});
