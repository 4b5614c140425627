/**
 * One rank of an expert-parallel MoE run on the CPU (a worker thread; test/expert-parallel.test.ts starts W of them
 * over backend-nccl's HostCollectives): attention tensor-parallel, experts partitioned (issue 31). Scenario 'model'
 * loads a MoE checkpoint as rank r of W with expert parallelism on and generates greedily, posting the tokens, the
 * logits and the expert tensors it holds; 'block' runs one FusedMoE on fixed router logits (routing the test chooses).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { HostCollectives } from '@fastkernels/backend-nccl';
import { Rng, Tensor, TensorParallelGroup, setTensorParallelGroup } from '@fastkernels/core';
import { EmulatedGraphRuntime, LLMEngine, baselineRegistry, generate, loadModel, setExpertParallel, taskProviders, tensorParallelProvider, type MixtralMoE, type SamplingParams } from '@fastkernels/model-zoo';

export interface MoeRankJob {
  readonly scenario: 'model' | 'block' | 'engine';
  readonly rank: number;
  readonly world: number;
  readonly shared: SharedArrayBuffer | null;
  /** model: the checkpoint folder, prompts and greedy steps. */
  readonly model?: string;
  readonly prompts?: number[][];
  readonly maxTokens?: number;
  /** block: FusedMoE(E, K, H, I) with seeded weights, T tokens, router logits [T, E] as given. */
  readonly block?: { readonly E: number; readonly K: number; readonly H: number; readonly I: number; readonly T: number; readonly logits: number[] };
  /** engine: the paged engine (chunked prefill, emulated decode graphs) over these requests. */
  readonly requests?: { promptIds: number[]; params: Partial<SamplingParams> }[];
}

export interface MoeRankResult {
  readonly rank: number;
  readonly error?: string;
  readonly tokens?: number[][];
  readonly logits?: number[][][];
  /** Expert parameter name -> [shape, bytes] on this rank. */
  readonly experts?: Record<string, { shape: number[]; bytes: number }>;
  /** Layer 0's down projection of the experts (w2_weight, down_proj or its MXFP4 blocks) as loaded (row-major). */
  readonly w2?: number[];
  /** block: the output [T, H]. */
  readonly out?: number[];
  readonly localExperts?: { start: number; count: number };
  /** engine: decode steps replayed from a (emulated) graph and eager ones. */
  readonly steps?: { graph: number; eager: number; fallback: string | null };
}

const job = workerData as MoeRankJob;
const backend = new CpuBackend();

function run(): MoeRankResult {
  const comm = job.world > 1 ? new HostCollectives(job.rank, job.world, job.shared!, 20_000) : null;
  setTensorParallelGroup(new TensorParallelGroup(job.rank, job.world, comm));
  setExpertParallel(true);
  const registry = baselineRegistry([...taskProviders, tensorParallelProvider]);
  if (job.scenario === 'block') return blockRun(registry);
  const loaded = loadModel(job.model!, { backend, registry, dtype: 'f32' });
  if (job.scenario === 'engine') {
    const engine = new LLMEngine(loaded.model, loaded.ctx, loaded.geometry, { maxNumSeqs: 4, maxNumBatchedTokens: 16, maxModelLen: 64, numKvBlocks: 12, graphs: new EmulatedGraphRuntime() });
    try {
      const out = engine.generate(job.requests!);
      return { rank: job.rank, tokens: out.map((o) => o.tokenIds), steps: { graph: engine.runner.stats.graphSteps, eager: engine.runner.stats.eagerSteps, fallback: engine.graphFallback?.reason ?? null } };
    } finally {
      engine.dispose();
      loaded.model.dispose();
    }
  }
  const experts = Object.fromEntries(
    loaded.model.namedParameters().filter(([k]) => /\.experts\.[a-z0-9_]+$/.test(k)).map(([k, p]) => [k, { shape: [...p.shape], bytes: p.numel * p.itemsize }]),
  );
  const w2 = loaded.model.namedParameters().find(([k]) => /^model\.layers\.0\.\w+\.experts\.(w2_weight|down_proj|down_proj_blocks)$/.test(k))![1];
  const w2Values = [...w2.toFloat64Array()];
  const res = generate(loaded.model, loaded.ctx, loaded.geometry, job.prompts!.map((p) => ({ promptIds: p })), { maxTokens: job.maxTokens!, collectLogits: true });
  loaded.model.dispose();
  return { rank: job.rank, experts, w2: w2Values, tokens: res.outputs.map((o) => o.tokenIds), logits: res.outputs.map((o) => o.logits!.map((row) => [...row])) };
}

/** One FusedMoE: the rank's experts of one seeded full set, on fixed router logits. */
function blockRun(registry: ReturnType<typeof baselineRegistry>): MoeRankResult {
  const { E, K, H, I, T, logits } = job.block!;
  const ctx = { backend, device: 0, dtype: 'f32' as const, registry };
  const m = registry.createIn<MixtralMoE>(ctx, 'L2/mixtral_moe', E, K, H, I).experts;
  const { start, count } = m.localExperts;
  const rng = new Rng(5);
  const w13 = rng.fillNormal(E * 2 * I * H, 1 / Math.sqrt(H));
  const w2 = rng.fillNormal(E * H * I, 1 / Math.sqrt(I));
  const x = rng.fillNormal(T * H, 1);
  const fill = (p: Tensor, all: Float64Array, per: number) => {
    const t = Tensor.fromArray(backend, all.subarray(start * per, (start + count) * per), p.shape, 'f32');
    p.copy_(t);
    t.dispose();
  };
  fill(m.w13Weight, w13, 2 * I * H);
  fill(m.w2Weight, w2, H * I);
  const xs = Tensor.fromArray(backend, x, [T, H], 'f32');
  const lg = Tensor.fromArray(backend, logits, [T, E], 'f32');
  const out = m.forward(xs, lg);
  return { rank: job.rank, out: [...out.toFloat64Array()], localExperts: { start, count } };
}

try {
  parentPort!.postMessage(run());
} catch (e) {
  parentPort!.postMessage({ rank: job.rank, error: (e as Error).stack ?? String(e) } satisfies MoeRankResult);
}
