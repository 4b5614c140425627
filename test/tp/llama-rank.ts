/**
 * One rank of the simulated tensor-parallel runs of tensor-parallel.test.ts: a worker thread (bundled with esbuild by
 * the test) that joins the other ranks' threads through HostCollectives (shared memory, CPU tensors), builds the
 * Llama model as rank `rank` of `world` (sharded weights, read from the checkpoint as this rank's slices), generates
 * greedily, and posts the tokens, the logits and the shapes of its shards back. Further scenarios run the rank's part of
 * `e2e --tp` (the paged engine, E2eRunner's drop-and-retry) and of `bench --tp` (L1/allreduce and the L2 parallel linear
 * layers in lockstep) the same way.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { HostCollectives } from '@fastkernels/backend-nccl';
import { Rng, Tensor, TensorParallelGroup, benchTask, errorMessage, setTensorParallelGroup, type CaseResult, type Module, type ModuleClass, type ModuleRegistry, type TaskDefinition } from '@fastkernels/core';
import {
  AllReduce, DEFAULT_SAMPLING, E2eRunner, EmulatedGraphRuntime, LLMEngine, RowParallelLinear, allreduceTask, baselineRegistry, generate, isGraphCapturing, loadModel,
  parallelLinearTasks, syntheticWorkload, taskProviders, tensorParallelProvider,
  type CapturedGraph, type E2eModelSource, type GraphRuntime, type SamplingParams, type VocabParallelEmbedding,
} from '@fastkernels/model-zoo';
import { agreeOnCase, sharedVerifySeed } from '../../packages/cli/src/bench/group.js';
import { runServeRank } from '../../packages/cli/src/commands/serve.js';

/** The engine scenario: requests, engine sizes, and what to make differ between the ranks. */
export interface EngineJob {
  readonly requests: { promptIds: number[]; params: Partial<SamplingParams> }[];
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  readonly maxModelLen: number;
  /** KV blocks per rank (index: rank); the ranks must settle on the smallest. */
  readonly numKvBlocks: readonly number[];
  /** 'emulated' = EmulatedGraphRuntime on every rank; 'fail-rank-1' = rank 1's capture throws. */
  readonly graphs: 'emulated' | 'fail-rank-1' | 'none';
  /** This rank's deadline passes after 3 steps, the other's not (clock skew): every rank must stop at the same step. */
  readonly pastDeadlineOnRank?: number;
}

export interface RankJob {
  readonly scenario: 'llama' | 'collectives' | 'embedding' | 'engine' | 'e2e' | 'bench-allreduce' | 'bench-linear' | 'serve' | 'serve-replay';
  readonly rank: number;
  readonly world: number;
  readonly shared: SharedArrayBuffer | null;
  readonly model?: string;
  readonly prompts?: number[][];
  readonly maxTokens?: number;
  readonly randomInit?: 'host';
  readonly engine?: EngineJob;
  /** e2e: candidates by name (see CANDIDATES). */
  readonly candidates?: readonly string[];
  /** bench-allreduce: the candidate AllReduce ('baseline' = the baseline against itself, 'copy' = no communication). */
  readonly allreduce?: 'baseline' | 'copy';
  /** bench-linear: the parallel linear task and its candidate ('baseline', or a row-parallel layer without its all-reduce). */
  readonly linear?: { readonly task: string; readonly candidate: 'baseline' | 'no-all-reduce' };
  /** serve-replay: the engine operations to replay (rank 0's trace of a serve run). */
  readonly trace?: EngineOp[];
  /** embedding: VocabParallelEmbedding(V, H) in `dtype`, its weight the rank's rows of a seeded [V, H] table, at `ids`. */
  readonly embedding?: { readonly V: number; readonly H: number; readonly dtype: 'f32' | 'bf16'; readonly seed: number; readonly ids: number[] };
  /** The host collectives' deadline (default 20 s). */
  readonly collectiveTimeoutMs?: number;
}

/** One engine operation of a serve run, as the engine saw it (sampling parameters merged with the defaults). */
export type EngineOp = ['add', number, number[], SamplingParams] | ['abort', number] | ['step'];

/** What a serve rank posts: rank 0's port once it listens, then (every rank) the result. */
export type ServeMessage = { kind: 'listening'; port: number } | RankResult;

export interface RankResult {
  readonly rank: number;
  readonly error?: string;
  readonly tokens?: number[][];
  /** logits[prompt][step] */
  readonly logits?: number[][][];
  /** Parameter name -> shape on this rank. */
  readonly shapes?: Record<string, number[]>;
  /** llama: this rank's embedding table and LM head weight as loaded (row-major). */
  readonly tables?: { embed: number[]; head: number[] };
  /** embedding: the output, this rank's first row and row count, and whether the all-reduce is the L1/allreduce child. */
  readonly embedding?: { values: number[]; shape: number[]; start: number; rows: number; allReduceChild: boolean };
  readonly collectives?: Record<string, number[]>;
  readonly engine?: { numKvBlocks: number; limitedBy: string; graphSteps: number; eagerSteps: number; graphFallback: string | null; timedOutAtStep?: number; error?: string };
  readonly e2e?: { outcome: string; discrepancies: number[]; noiseDiscrepancies: number[]; drops: [string, string][]; runs: number; log: string[] };
  readonly bench?: CaseResult[];
  /** serve: the engine's operations in order, and the finished requests' tokens by request id. */
  readonly serve?: { trace: EngineOp[]; outputs: Record<number, number[]> };
}

const job = workerData as RankJob;
const backend = new CpuBackend();

async function run(): Promise<RankResult> {
  const comm = job.world > 1 ? new HostCollectives(job.rank, job.world, job.shared!, job.collectiveTimeoutMs ?? 20_000) : null;
  const group = new TensorParallelGroup(job.rank, job.world, comm);
  setTensorParallelGroup(group);
  if (job.scenario === 'collectives') {
    const t = (v: number[], shape: number[]) => Tensor.fromArray(backend, v, shape, 'f32');
    const r = job.rank;
    const sum = group.allReduce_(t([r + 1, 10 * r, -r], [3]));
    const max = comm!.allReduce(t([r, 5 - r], [2]), { op: 'max' });
    const gathered = group.allGather(t([r, r + 0.5, r + 0.25, r + 0.125], [2, 2]), -1); // [2, 2W]
    return { rank: r, collectives: { sum: [...sum.toFloat64Array()], max: [...max.toFloat64Array()], gather: [...gathered.toFloat64Array()], gatherShape: [...gathered.shape] } };
  }
  if (job.scenario === 'embedding') return embeddingRun(job);
  if (job.scenario === 'engine') return engineRun(job, group);
  if (job.scenario === 'e2e') return e2eRun(job);
  if (job.scenario === 'bench-allreduce') return benchAllreduce(job, group);
  if (job.scenario === 'bench-linear') return benchLinear(job, group);
  if (job.scenario === 'serve' || job.scenario === 'serve-replay') return serveRun(job, group);
  const registry = baselineRegistry([...taskProviders, tensorParallelProvider]);
  const loaded = loadModel(job.model!, { backend, registry, dtype: 'f32', ...(job.randomInit ? { randomInit: job.randomInit } : {}) });
  const shapes = Object.fromEntries(loaded.model.namedParameters().map(([k, p]) => [k, [...p.shape]]));
  const params = loaded.model.stateDict();
  const tables = { embed: [...params.get('model.embed_tokens.weight')!.toFloat64Array()], head: [...params.get('lm_head.linear.weight')!.toFloat64Array()] };
  const res = generate(loaded.model, loaded.ctx, loaded.geometry, job.prompts!.map((p) => ({ promptIds: p })), { maxTokens: job.maxTokens!, collectLogits: true });
  loaded.model.dispose();
  return {
    rank: job.rank,
    shapes,
    tables,
    tokens: res.outputs.map((o) => o.tokenIds),
    logits: res.outputs.map((o) => o.logits!.map((row) => [...row])),
  };
}

/** The L1/embedding baseline on this rank (vocab-parallel at world > 1 when it divides V), with the registry's L1/allreduce. */
function embeddingRun(job: RankJob): RankResult {
  const { V, H, dtype, seed, ids } = job.embedding!;
  const registry = baselineRegistry([...taskProviders, tensorParallelProvider]);
  const m = registry.createIn<VocabParallelEmbedding>({ backend, device: 0, dtype, registry }, 'L1/embedding', V, H);
  const full = new Rng(seed).fillNormal(V * H, 1);
  const rows = m.weight.shape[0]!;
  const src = Tensor.fromArray(backend, full.subarray(m.vocabStartIndex * H, (m.vocabStartIndex + rows) * H), [rows, H], dtype);
  m.weight.copy_(src);
  const x = Tensor.fromArray(backend, ids, [ids.length], 'i64');
  const y = m.forward(x);
  const allReduceChild = (m as unknown as { allReduce: unknown }).allReduce instanceof AllReduce;
  const out = { values: [...y.toFloat64Array()], shape: [...y.shape], start: m.vocabStartIndex, rows, allReduceChild };
  for (const t of [src, x, y]) t.dispose();
  m.dispose();
  return { rank: job.rank, embedding: out };
}

/**
 * A graph runtime whose capture fails on one rank (NCCL refusing a capture, say): every rank must decode eagerly. A
 * capture records without running (as a CUDA capture queues no work, and NCCL communicates nothing while capturing),
 * so the rank that captured has made no collective its failed peer did not.
 */
class FailingOnRank implements GraphRuntime {
  constructor(private readonly failRank: number) {}
  createPool(bytes: number): unknown {
    return { bytes };
  }
  capture(fn: () => void): CapturedGraph {
    if (job.rank === this.failRank) throw new Error('ncclAllReduce: operation not permitted when stream is capturing (simulated)');
    return { replay: fn, destroy: () => {} };
  }
  poolBytes(pool: unknown): number {
    return (pool as { bytes: number }).bytes;
  }
  destroyPool(): void {}
}

function engineRun(job: RankJob, group: TensorParallelGroup): RankResult {
  const e = job.engine!;
  const registry = baselineRegistry([...taskProviders, tensorParallelProvider]);
  const loaded = loadModel(job.model!, { backend, registry, dtype: 'f32' });
  const graphs = e.graphs === 'none' ? false : e.graphs === 'emulated' ? new EmulatedGraphRuntime() : new FailingOnRank(1);
  let engine: LLMEngine | undefined;
  try {
    engine = new LLMEngine(loaded.model, loaded.ctx, loaded.geometry, {
      maxNumSeqs: e.maxNumSeqs, maxNumBatchedTokens: e.maxNumBatchedTokens, maxModelLen: e.maxModelLen, numKvBlocks: e.numKvBlocks[group.rank]!, graphs,
    });
    const info = () => ({
      numKvBlocks: engine!.budget.numKvBlocks, limitedBy: engine!.budget.limitedBy, graphSteps: engine!.runner.stats.graphSteps, eagerSteps: engine!.runner.stats.eagerSteps,
      graphFallback: engine!.graphFallback?.reason ?? null,
    });
    // both ranks have a deadline (an hour away); after 3 steps one rank's clock says it passed
    if (e.pastDeadlineOnRank !== undefined) engine.deadline = performance.now() + 3_600_000;
    let steps = 0;
    try {
      const out = engine.generate(e.requests, () => {
        if (++steps === 3 && job.rank === e.pastDeadlineOnRank) engine!.deadline = performance.now() - 1;
      });
      return { rank: job.rank, tokens: out.map((o) => o.tokenIds), engine: info() };
    } catch (err) {
      return { rank: job.rank, engine: { ...info(), timedOutAtStep: steps, error: `${(err as Error).name}: ${errorMessage(err)}` } };
    }
  } finally {
    engine?.dispose();
    loaded.model.dispose();
  }
}

/**
 * serve --tp's rank (scenario 'serve'): the engine of engineRun, traced (every add, abort and step, in order), run by
 * runServeRank as the CLI's ranks run it: rank 0 serves HTTP on a free port (posted to the test) until the test posts
 * 'stop'; the others follow the control channel. 'serve-replay' (world 1): the same engine replaying a trace.
 */
async function serveRun(job: RankJob, group: TensorParallelGroup): Promise<RankResult> {
  const e = job.engine!;
  const registry = baselineRegistry([...taskProviders, tensorParallelProvider]);
  const loaded = loadModel(job.model!, { backend, registry, dtype: 'f32' });
  const engine = new LLMEngine(loaded.model, loaded.ctx, loaded.geometry, {
    maxNumSeqs: e.maxNumSeqs, maxNumBatchedTokens: e.maxNumBatchedTokens, maxModelLen: e.maxModelLen, numKvBlocks: e.numKvBlocks[group.rank]!, graphs: new EmulatedGraphRuntime(),
  });
  const trace: EngineOp[] = [];
  const outputs: Record<number, number[]> = {};
  const { addRequest, abortRequest, step } = { addRequest: engine.addRequest.bind(engine), abortRequest: engine.abortRequest.bind(engine), step: engine.step.bind(engine) };
  engine.addRequest = (p, params = {}) => {
    const id = addRequest(p, params);
    trace.push(['add', id, [...p], { ...DEFAULT_SAMPLING, ignoreEos: false, ...params }]); // ignoreEos false = unset
    return id;
  };
  engine.abortRequest = (id) => {
    trace.push(['abort', id]);
    return abortRequest(id);
  };
  engine.step = () => {
    trace.push(['step']);
    const o = step();
    for (const f of o.finished) outputs[f.requestId] = f.tokenIds;
    return o;
  };
  try {
    if (job.scenario === 'serve-replay') {
      for (const op of job.trace!) {
        if (op[0] === 'add') {
          if (engine.addRequest(op[2], op[3]) !== op[1]) throw new Error(`replay: request id differs from ${op[1]}`);
        } else if (op[0] === 'abort') engine.abortRequest(op[1]);
        else engine.step();
      }
      return { rank: job.rank, serve: { trace, outputs } };
    }
    const stop = new Promise<void>((ok) => parentPort!.on('message', (m) => m === 'stop' && ok()));
    await runServeRank(engine, {
      rank: group.rank, world: group.world, token: 'test-token', exchangePort: (p) => group.agree([p], 'max', { backend, device: 0 })[0]!,
      modelName: 'tiny', host: '127.0.0.1', port: 0, log: () => {}, stop,
      onListening: (a) => parentPort!.postMessage({ kind: 'listening', port: a.port } satisfies ServeMessage),
    });
    return { rank: job.rank, serve: { trace, outputs } };
  } finally {
    engine.dispose();
    loaded.model.dispose();
  }
}

/** Candidates for the e2e scenario: subclasses of the baselines, as a candidate set exports them. */
function candidates(registry: ReturnType<typeof baselineRegistry>): Record<string, { taskId: string; cls: ModuleClass }> {
  type Forward = (...a: unknown[]) => unknown;
  const sub = (taskId: string, forward: (base: Forward, self: Module, args: unknown[]) => unknown) => {
    const Base = registry.resolve(taskId) as unknown as new (...a: unknown[]) => Module;
    class Candidate extends Base {
      override forward(...args: unknown[]): unknown {
        return forward((...a) => (Base.prototype.forward as Forward).apply(this, a), this, args);
      }
    }
    return { taskId, cls: Candidate as unknown as ModuleClass };
  };
  return {
    'good-linear': sub('L1/linear', (base, _s, a) => base(...a)),
    'wrong-silu': sub('L1/silu_and_mul', (base, _s, a) => (base(...a) as Tensor).fill_(1)),
    'throwing-rotary': sub('L1/rotary_emb', () => {
      throw new Error('illegal memory access (simulated)');
    }),
    'uncapturable-embedding': sub('L1/embedding', (base, _s, a) => {
      if (isGraphCapturing()) throw new Error('operation not permitted when stream is capturing (simulated host sync)');
      return base(...a);
    }),
  };
}

function e2eRun(job: RankJob): RankResult {
  const registry = baselineRegistry([...taskProviders, tensorParallelProvider]);
  const source: E2eModelSource = {
    name: 'tiny', family: 'dense-moe-llm',
    load: (reg) => {
      const m = loadModel(job.model!, { backend, registry: reg, dtype: 'f32' });
      return { model: m.model, ctx: m.ctx, geometry: m.geometry, dispose: () => m.model.dispose() };
    },
  };
  const log: string[] = [];
  const all = candidates(registry);
  const runner = new E2eRunner(source, registry, {
    engine: { maxModelLen: 128, maxNumSeqs: 4, maxNumBatchedTokens: 32, graphs: new EmulatedGraphRuntime() },
    throughput: syntheticWorkload({ numRequests: 6, inputLen: [3, 40], outputLen: [4, 12], seed: 0, vocabSize: 256 }),
    latency: { batchSizes: [1, 2], promptLen: 8, outputLen: 4, warmups: 1, repeats: 1 },
    runTimeoutMs: 600_000,
    collectivesOn: { backend, device: 0 },
    log: (l) => log.push(l),
  });
  const { record, details } = runner.evaluate((job.candidates ?? []).map((n) => all[n]!));
  return {
    rank: job.rank,
    e2e: { outcome: record.outcome, discrepancies: record.discrepancies, noiseDiscrepancies: record.noiseDiscrepancies, drops: record.drops.map((d) => [d.task, d.category]), runs: details.runs, log },
  };
}

async function benchAllreduce(job: RankJob, group: TensorParallelGroup): Promise<RankResult> {
  const registry = baselineRegistry([...taskProviders, tensorParallelProvider]);
  const candidate = registry.child('candidate');
  if (job.allreduce === 'copy') {
    class CopyAllReduce extends AllReduce {
      override forward(x: Tensor): Tensor {
        return x.clone(); // no communication: right at world 1 only
      }
    }
    candidate.override('L1/allreduce', CopyAllReduce);
  }
  return { rank: job.rank, bench: await benchInGroup(allreduceTask, registry, candidate, group) };
}

/** A RowParallelLinear that skips the all-reduce: each rank returns its partial product (right at world 1 only). */
class NoReduceRowParallelLinear extends RowParallelLinear {
  override forward(x: Tensor): [Tensor, Tensor | null] {
    const xParallel = this.inputIsParallel ? x : this.group.split(x, -1);
    const out = this.ctx.backend.ops.linear(xParallel, this.weight, this.tpRank > 0 || this.skipBiasAdd ? null : this.bias);
    if (xParallel !== x) xParallel.dispose();
    return [out, this.skipBiasAdd ? this.bias : null];
  }
}

async function benchLinear(job: RankJob, group: TensorParallelGroup): Promise<RankResult> {
  const registry = baselineRegistry([...taskProviders, tensorParallelProvider]);
  const candidate = registry.child('candidate');
  const task = parallelLinearTasks.find((t) => t.id === job.linear!.task)!;
  if (job.linear!.candidate === 'no-all-reduce') candidate.override('L2/row_parallel_linear', NoReduceRowParallelLinear);
  return { rank: job.rank, bench: await benchInGroup(task, registry, candidate, group) };
}

/** What a group worker runs for one task: the same seeds, a warm-up counted in calls, the shared verify seed, the agreement. */
async function benchInGroup(task: TaskDefinition, registry: ModuleRegistry, candidate: ModuleRegistry, group: TensorParallelGroup): Promise<CaseResult[]> {
  const results: CaseResult[] = [];
  for (const [i, c] of task.cases.ci.entries()) {
    const [r] = await benchTask({
      task, baseline: registry, candidate, backend, cases: [c], rounds: 3, iters: 6, warmup: 2, warmupMs: 0,
      seed: 200, verifySeed: sharedVerifySeed(12345, task.id, i), hiddenShape: true, inputSets: 2,
    });
    results.push(group.world > 1 ? agreeOnCase(group, { backend, device: 0 }, r!) : r!);
  }
  return results;
}

try {
  parentPort!.postMessage(await run());
} catch (e) {
  parentPort!.postMessage({ rank: job.rank, error: (e as Error).stack ?? String(e) } satisfies RankResult);
}
