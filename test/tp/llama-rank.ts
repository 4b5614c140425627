/**
 * One rank of the simulated tensor-parallel runs of tensor-parallel.test.ts: a worker thread (bundled with esbuild by
 * the test) that joins the other ranks' threads through HostCollectives (shared memory, CPU tensors), builds the
 * Llama model as rank `rank` of `world` (sharded weights, read from the checkpoint as this rank's slices), generates
 * greedily, and posts the tokens, the logits and the shapes of its shards back.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { HostCollectives, tensorParallelProvider } from '@fastkernels/backend-nccl';
import { Tensor, TensorParallelGroup, setTensorParallelGroup } from '@fastkernels/core';
import { baselineRegistry, generate, loadLlamaModel, taskProviders } from '@fastkernels/model-zoo';

export interface RankJob {
  readonly scenario: 'llama' | 'collectives';
  readonly rank: number;
  readonly world: number;
  readonly shared: SharedArrayBuffer | null;
  readonly model?: string;
  readonly prompts?: number[][];
  readonly maxTokens?: number;
  readonly randomInit?: 'host';
}

export interface RankResult {
  readonly rank: number;
  readonly error?: string;
  readonly tokens?: number[][];
  /** logits[prompt][step] */
  readonly logits?: number[][][];
  /** Parameter name -> shape on this rank. */
  readonly shapes?: Record<string, number[]>;
  readonly collectives?: Record<string, number[]>;
}

const job = workerData as RankJob;
const backend = new CpuBackend();

function run(): RankResult {
  const comm = job.world > 1 ? new HostCollectives(job.rank, job.world, job.shared!, 20_000) : null;
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
  const registry = baselineRegistry([...taskProviders, tensorParallelProvider]);
  const loaded = loadLlamaModel(job.model!, { backend, registry, dtype: 'f32', ...(job.randomInit ? { randomInit: job.randomInit } : {}) });
  const shapes = Object.fromEntries(loaded.model.namedParameters().map(([k, p]) => [k, [...p.shape]]));
  const res = generate(loaded.model, loaded.ctx, loaded.config, job.prompts!.map((p) => ({ promptIds: p })), { maxTokens: job.maxTokens!, collectLogits: true });
  loaded.model.dispose();
  return {
    rank: job.rank,
    shapes,
    tokens: res.outputs.map((o) => o.tokenIds),
    logits: res.outputs.map((o) => o.logits!.map((row) => [...row])),
  };
}

try {
  parentPort!.postMessage(run());
} catch (e) {
  parentPort!.postMessage({ rank: job.rank, error: (e as Error).stack ?? String(e) } satisfies RankResult);
}
