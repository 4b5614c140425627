import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, basename, resolve } from 'node:path';
import { UserError, type Backend, type DType, type ModuleRegistry } from '@fastkernels/core';
import { E2eReportSchema, type E2eReportInput } from '@fastkernels/macroeval';
import {
  Checkpoint, DEFAULT_LATENCY, E2eRunner, checkWorkload, loadModel, loadModelFolderConfig, resolveWorkload,
  type CandidateOverride, type E2eDetails, type E2eModelRecordOut, type E2eModelSource, type EngineOptions, type LatencySpec, type Workload,
} from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { EsbuildCandidateLoader, listCandidateFiles } from '../candidates/loader.js';
import { environment, selectBackend, type Env } from '../env.js';
import { intFlag, listFlag } from '../flags.js';
import type { Io } from '../io.js';
import { checkE2eCommonArgs, e2eCommonFlags, modelFolders, timingCounts, type E2eCommonArgs, type FolderE2eRunner } from './e2e-common.js';
import { isPipelineFolder, pipelineFlags, runPipelineE2e, type PipelineE2eArgs } from './e2e-pipeline.js';
import { isVisionFolder, runVisionE2e, visionE2eFlags, type VisionE2eArgs } from './e2e-vision.js';
import { E2E_DOCUMENTS, encoderFlags, isEncoderFolder, runEncoderE2e, type EncoderE2eArgs } from './e2e-encoder.js';
import { TP_HELP, checkTensorParallelDevices, checkTensorParallelModel, runWithTensorParallel, type RankRun } from '../tensor-parallel.js';
import { EP_HELP, resolveParallelFlags } from '../expert-parallel.js';

/** Engine flags shared by e2e, capture (and serve). */
export interface EngineArgs {
  backend: string;
  dtype?: string;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  maxModelLen?: number;
  gpuMemoryUtilization: number;
  numKvBlocks?: number;
  graphs: boolean;
  randomInit?: string;
}

const DTYPES: Record<string, DType> = { bf16: 'bf16', f16: 'f16', f32: 'f32' };

/** --dtype as a DType (undefined: the config's). */
export function dtypeFlag(a: Pick<EngineArgs, 'dtype'>): DType | undefined {
  return a.dtype ? DTYPES[a.dtype]! : undefined;
}

export function engineOptions(a: EngineArgs, log: (l: string) => void): EngineOptions {
  if (!(a.gpuMemoryUtilization > 0 && a.gpuMemoryUtilization <= 1)) throw new UserError(`must be in (0, 1], got ${a.gpuMemoryUtilization}`, { field: '--gpu-memory-utilization' });
  return {
    maxNumSeqs: intFlag('max-num-seqs', a.maxNumSeqs, 1, 4096),
    maxNumBatchedTokens: intFlag('max-num-batched-tokens', a.maxNumBatchedTokens, 1, 1 << 20),
    ...(a.maxModelLen !== undefined ? { maxModelLen: intFlag('max-model-len', a.maxModelLen, 2, 1 << 22) } : {}),
    gpuMemoryUtilization: a.gpuMemoryUtilization,
    ...(a.numKvBlocks !== undefined ? { numKvBlocks: intFlag('num-kv-blocks', a.numKvBlocks, 1, 1 << 24) } : {}),
    graphs: a.graphs,
    log,
  };
}

export function engineFlags<T>(y: Argv<T>) {
  return y
    .option('backend', { type: 'string', choices: ['auto', 'cpu', 'cuda'], default: 'auto', describe: 'auto = cuda when available, else cpu' })
    .option('dtype', { type: 'string', choices: Object.keys(DTYPES), describe: "model dtype [default: the config's torch_dtype, else bf16]" })
    .option('max-num-seqs', { type: 'number', default: 256, describe: 'sequences per step' })
    .option('max-num-batched-tokens', { type: 'number', default: 16384, describe: 'tokens per step (prefill chunks + decodes)' })
    .option('max-model-len', { type: 'number', describe: 'longest prompt + output [default: min(max_position_embeddings, 4096)]' })
    .option('gpu-memory-utilization', { type: 'number', default: 0.9, describe: 'fraction of device memory for weights, activations, graphs and the KV cache' })
    .option('num-kv-blocks', { type: 'number', describe: 'use exactly this many 16-token KV blocks (skips sizing from memory)' })
    .option('graphs', { type: 'boolean', default: true, describe: 'CUDA-graph decode (--no-graphs: eager)' })
    .option('random-init', { type: 'string', choices: ['host', 'device'], describe: 'seeded random weights instead of the safetensors in the folder: drawn on the host (exact, slow) or on the device (fast) [default without safetensors: device on cuda, host on cpu or under --tp]' });
}

/**
 * A model source: the folder loaded with whatever registry a run gives. Under tensor parallelism (`device`: the rank's
 * GPU) each load builds this rank's shard; random weights are then drawn on the host (device random init fills whole
 * tensors, not a rank's slice of them).
 */
export function modelSource(dir: string, backend: Backend, a: EngineArgs, tp: { world: number; device?: number } = { world: 1 }): E2eModelSource {
  const { architecture } = loadModelFolderConfig(dir);
  // A folder's safetensors are the model unless --random-init asks otherwise; without them, seeded random weights
  // (drawn on the device where that is possible). Run 9 found the checkpoint ignored here: serve/e2e/capture always
  // drew random weights, so `serve --model <checkpoint>` answered with another model than `generate`.
  const randomInit = (a.randomInit ?? (Checkpoint.exists(dir) ? undefined : backend.name === 'cuda' && tp.world === 1 ? 'device' : 'host')) as 'host' | 'device' | undefined;
  return {
    name: basename(resolve(dir)),
    family: architecture.family,
    load: (registry: ModuleRegistry) => {
      const m = loadModel(dir, { backend, registry, ...(randomInit ? { randomInit } : {}), ...(tp.device !== undefined ? { device: tp.device } : {}), ...(a.dtype ? { dtype: dtypeFlag(a)! } : {}) });
      return { model: m.model, ctx: m.ctx, geometry: m.geometry, dispose: () => m.model.dispose() };
    },
  };
}

/** The LLM runner's own options (the common ones: e2e-common.ts; the other folders': their runners). */
interface LlmE2eArgs {
  workload: string;
  requests: string;
  latencyBatchSizes: string;
  latencyPrompt: number;
  latencyOutput: number;
  throughputRepeats?: number;
  timeout: number;
  details?: string;
  agent?: string;
  tp?: number;
  ep?: number;
}

export interface E2eArgs extends EngineArgs, E2eCommonArgs, LlmE2eArgs, PipelineE2eArgs, VisionE2eArgs, EncoderE2eArgs {}

/**
 * The folders that are not LLMs, each with its runner: where any --model folder is of one of these kinds, the first
 * such kind's runner takes the run (and refuses more than one folder). Pipeline folders (FLUX.1): images; vision
 * (YOLOv10, ConvNeXt-V2): seeded image batches; encoders (BGE-M3, ColBERTv2): embeddings of seeded documents.
 */
const FOLDER_RUNNERS: readonly { readonly is: (dir: string) => boolean; readonly run: FolderE2eRunner<E2eArgs> }[] = [
  { is: isPipelineFolder, run: runPipelineE2e },
  { is: isVisionFolder, run: runVisionE2e },
  { is: isEncoderFolder, run: runEncoderE2e },
];

async function loadCandidates(env: Env, dir: string, keepGoing: boolean, backend: Backend): Promise<{ set: CandidateOverride[]; failures: { taskId: string; detail: string }[] }> {
  const files = listCandidateFiles(dir);
  if (!files.length) throw new UserError('holds no candidate files', { file: dir, field: '--candidates', fix: 'put candidates at L<level>/<task stem>.ts (`fastkernels stubs --out DIR` writes skeletons)' });
  // the backend, so a .cu candidate compiles now (a compile error is an import failure naming its line, as in bench)
  const loaded = await new EsbuildCandidateLoader({ backend: backend.name }).load(dir, env.taskMap);
  const failures = loaded.failures.map((f) => ({ taskId: f.file.taskId, detail: f.error.describe().split('\n')[0]! }));
  if (failures.length && !keepGoing) {
    throw new UserError(`${failures.length} candidate file${failures.length === 1 ? '' : 's'} failed to load:\n${loaded.failures.map((f) => `  ${f.error.describe().replace(/\n/g, '\n    ')}`).join('\n')}`, {
      file: dir, field: '--candidates', fix: 'fix the files, or pass --keep-going to drop them (category import) and run the rest',
    });
  }
  return { set: loaded.candidates.map((c) => ({ taskId: c.task.id, cls: c.cls })), failures };
}

/** The throughput workload of one model (validated against its vocabulary and max-model-len). */
function throughputFor(argv: E2eArgs, dir: string, maxModelLen: number | undefined): Workload {
  const g = loadModelFolderConfig(dir).geometry;
  const w = resolveWorkload(argv.requests, g.vocabSize);
  checkWorkload(w, g.vocabSize, maxModelLen ?? Math.min(g.maxPositionEmbeddings, 4096));
  return w;
}

export async function runE2e(argv: E2eArgs, io: Io, rawArgs: readonly string[] = process.argv.slice(2)): Promise<void> {
  checkE2eCommonArgs(argv);
  const kinds = { throughput: ['throughput'], latency: ['latency'], all: ['throughput', 'latency'] }[argv.workload];
  if (!kinds) throw new UserError(`unknown workload '${argv.workload}'`, { field: '--workload', fix: 'throughput, latency or all' });
  const models = modelFolders(argv);
  const folder = FOLDER_RUNNERS.find((r) => models.some(r.is));
  if (folder) {
    const env = environment();
    const backend = selectBackend(env, argv.backend);
    const { set } = argv.selfTest ? { set: [] } : await loadCandidates(env, argv.candidates!, Boolean(argv.keepGoing), backend);
    const dtype = dtypeFlag(argv);
    return folder.run(argv, io, { backend, baseline: env.registry, set, ...(dtype ? { dtype } : {}) });
  }
  const tp = resolveParallelFlags(argv, models);
  if (tp > 1 && argv.randomInit === 'device') {
    throw new UserError('device random init cannot be sharded over ranks', { field: '--random-init', fix: 'with --tp, use --random-init host (the default then) or a checkpoint (`fastkernels init-weights`)' });
  }
  const env = environment();
  const backend = selectBackend(env, argv.backend);
  engineOptions(argv, () => {}); // the engine flags, checked before any rank starts
  const latency: LatencySpec | undefined = kinds.includes('latency') ? {
    ...DEFAULT_LATENCY,
    batchSizes: listFlag(argv.latencyBatchSizes).map((s) => intFlag('latency-batch-sizes', s, 1, 4096)),
    promptLen: intFlag('latency-prompt', argv.latencyPrompt, 1, 1 << 20),
    outputLen: intFlag('latency-output', argv.latencyOutput, 1, 1 << 20),
    ...timingCounts(argv, 0),
  } : undefined;
  const timeoutS = intFlag('timeout', argv.timeout, 1, 1 << 30);
  // the self-test is where the interval is checked (it must contain 1): time it three times by default
  const throughputRepeats = intFlag('throughput-repeats', argv.throughputRepeats ?? (argv.selfTest ? 3 : 1), 1, 100);
  await runWithTensorParallel(
    {
      tp, io, rawArgs,
      preflight: async () => {
        // what a rank would refuse, refused here once: the models split over tp, the candidates, the workload, the devices
        for (const dir of models) checkTensorParallelModel(tp, dir);
        if (!argv.selfTest) await loadCandidates(env, argv.candidates!, Boolean(argv.keepGoing), backend);
        if (kinds.includes('throughput')) for (const dir of models) throughputFor(argv, dir, argv.maxModelLen);
        checkTensorParallelDevices(tp, backend);
      },
    },
    (rank) => e2eOn(argv, rank, { env, backend, models, kinds, latency, timeoutS, throughputRepeats }),
  );
}

interface E2ePlan {
  readonly env: Env;
  readonly backend: Backend;
  readonly models: readonly string[];
  readonly kinds: readonly string[];
  readonly latency: LatencySpec | undefined;
  readonly timeoutS: number;
  readonly throughputRepeats: number;
}

/**
 * The evaluation, on this process (tp 1) or as one rank of `--tp N`: every rank runs it over its shard (SPMD, see
 * E2eRunner); only rank 0 prints and writes --out/--details.
 */
async function e2eOn(argv: E2eArgs, rank: RankRun, plan: E2ePlan): Promise<void> {
  const { env, backend, models, kinds, latency, timeoutS, throughputRepeats } = plan;
  const io = rank.io;
  const log = (l: string) => io.err(`${l}\n`);
  const engine = engineOptions(argv, log);
  const { set, failures } = argv.selfTest ? { set: [], failures: [] } : await loadCandidates(env, argv.candidates!, Boolean(argv.keepGoing), backend);
  if (rank.world > 1) log(`e2e: tensor parallel over ${rank.world} GPUs (rank 0 reports; every rank runs the same evaluation on its shard)`);

  const records: E2eModelRecordOut[] = [];
  const details: Record<string, E2eDetails> = {};
  const report = (): E2eReportInput => ({
    schema_version: 1, ...(argv.agent ? { agent: argv.agent } : {}), mode: argv.selfTest ? 'self-test' : 'composed',
    gpu: backend.devices()[0]?.name ?? backend.name, ...(rank.world > 1 ? { gpu_count: rank.world } : {}), versions: { ...backend.versions() }, models: records,
  });
  const write = () => {
    if (!records.length || !rank.primary) return;
    const parsed = E2eReportSchema.safeParse(report());
    if (!parsed.success) throw new Error(`internal: the e2e report does not match E2eReportSchema: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
    if (argv.out) {
      mkdirSync(dirname(resolve(argv.out)), { recursive: true });
      writeFileSync(argv.out, JSON.stringify(parsed.data, null, 2) + '\n');
    }
    if (argv.details) writeFileSync(argv.details, JSON.stringify(details, null, 2) + '\n');
  };
  for (const dir of models) {
    const src = modelSource(dir, backend, argv, { world: rank.world, ...(rank.device !== undefined ? { device: rank.device } : {}) });
    const throughput = kinds.includes('throughput') ? throughputFor(argv, dir, engine.maxModelLen) : undefined;
    const runner = new E2eRunner(src, env.registry, {
      engine, ...(throughput ? { throughput } : {}), ...(latency ? { latency } : {}), runTimeoutMs: timeoutS * 1000, throughputRepeats, importFailures: failures, log,
      collectivesOn: { backend, device: rank.device ?? 0 },
    });
    let r;
    try {
      r = runner.evaluate(set);
    } catch (e) {
      write(); // partial results (earlier models) are kept
      throw e;
    }
    records.push(r.record);
    details[src.name] = r.details;
    write();
    const rec = r.record;
    const f = (x?: number, ci?: [number, number]) => (x === undefined ? '-' : `${x.toFixed(3)}x${ci ? ` [${ci[0].toFixed(3)}, ${ci[1].toFixed(3)}]` : ''}`);
    const agree = rec.discrepancies.filter((d) => d === 0).length;
    io.out(`${src.name}: ${rec.outcome}, throughput ${f(rec.throughputSpeedup, rec.throughputSpeedupCi)}, latency ${f(rec.latencySpeedup, rec.latencySpeedupCi)}, exact agreement ${agree}/${rec.discrepancies.length}` +
      `${rec.drops.length ? `, dropped ${rec.drops.map((d) => `${d.task} (${d.category})`).join(', ')}` : ''}${rec.asIs && rec.asIs.outcome !== 'ok' ? `; as-is: ${rec.asIs.outcome}` : ''}` +
      `${rec.graphs === false ? `; eager decode on both sides (${rec.graphsReason})` : ''}\n`);
    const spread = r.details.runToRun;
    if (r.details.baseline.throughputTokS) io.err(`  baseline ${r.details.baseline.throughputTokS.toFixed(1)} output tok/s; ${r.details.runs} runs; intervals widened by the noise run's spread (throughput ${spread.throughput.toFixed(4)}x, latency ${spread.latency.toFixed(4)}x)\n`);
  }
  if (argv.json) io.out(JSON.stringify({ report: E2eReportSchema.parse(report()), details }, null, 2) + '\n');
}

/** The LLM runner's own flags with their help. */
function llmE2eFlags<T>(y: Argv<T>) {
  return y
    .option('workload', { type: 'string', choices: ['throughput', 'latency', 'all'], default: 'all' })
    .option('requests', { type: 'string', default: 'synthetic:256:100-1024:100-1024:0', describe: 'throughput requests: a JSONL file ({"prompt_ids": [...], "output_len": N} per line) or synthetic:N:IN_LO-IN_HI:OUT_LO-OUT_HI:SEED' })
    .option('latency-batch-sizes', { type: 'string', default: '1,32' })
    .option('latency-prompt', { type: 'number', default: 128 })
    .option('latency-output', { type: 'number', default: 128 })
    .option('throughput-repeats', { type: 'number', describe: 'timed passes over the throughput workload per run (median; 2+ give a bootstrap interval of the throughput speedup) [default: 3 with --self-test, else 1]' })
    .option('timeout', { type: 'number', default: 3600, describe: 'seconds one run may take (checked between steps)' })
    .option('details', { type: 'string', describe: 'write raw numbers (baseline tok/s, latencies, host fraction) here' })
    .option('agent', { type: 'string', describe: 'agent name for the report' })
    .option('tp', { type: 'number', default: 1, describe: TP_HELP })
    .option('ep', { type: 'number', describe: EP_HELP });
}

export function e2eCommand(io: Io, rawArgs: readonly string[] = process.argv.slice(2)) {
  return {
    command: 'e2e',
    describe: 'Run models end to end with a candidate set: baseline, noise and candidate runs, drop-and-retry, MacroEval record',
    // in --help: the engine's flags, the common ones, the LLM runner's, then the pipeline, vision and encoder folders'
    builder: (y: Argv) =>
      encoderFlags(visionE2eFlags(pipelineFlags(llmE2eFlags(e2eCommonFlags(engineFlags(y))))), E2E_DOCUMENTS)
        .example('$0 e2e --model ./llama3-8b --candidates my-kernels --out e2e.json', 'all workloads, drop-and-retry, MacroEval record')
        .example('$0 e2e --model ./tiny --self-test --backend cpu --requests synthetic:8:4-32:4-8:0 --latency-batch-sizes 1', 'the self-test on the CPU')
        .example('$0 e2e --model ./llama3-8b --candidates my-kernels --tp 2 --out e2e-tp2.json', 'the same evaluation with the model split over 2 GPUs')
        .example('$0 e2e --model ./FLUX.1-dev --candidates my-kernels --size 1024 --steps 28 --warmups 1 --repeats 3 --out e2e-flux.json', 'a FLUX pipeline folder: images/s, step latency, latents at every step, image PSNR')
        .example('$0 e2e --model ./yolov10n --candidates my-kernels --batch-sizes 1,32 --images 256 --out e2e-yolo.json', 'a vision folder: images/s and batch latency per batch size, head output and top-k against the baseline')
        .epilog(
          [
            '--tp N: the command starts N ranks through `fastkernels launch` (one process per GPU), and every',
            'rank runs the whole evaluation on its shard of the model: the same requests, scheduling and sampled',
            'tokens (the LM head all-gathers the logits), so every rank drops the same candidates; the ranks',
            "agree on each run's outcome, the KV block count and the deadline. A decode-graph capture that fails",
            'under --tp falls back to eager decode, with the reason logged (a candidate that breaks a capture the',
            'baseline passed is still dropped: compile). Only rank 0 prints and writes --out/--details. Checked',
            'before any rank starts (exit 2): the candidates, the workload, --backend cuda, N GPUs, NCCL, and',
            'heads, kv heads and intermediate_size divisible by N. Without safetensors, --tp draws the random',
            'weights on the host.',
            '',
            'Candidates in any language: .ts/.js, .cu (compiled at load; --backend cuda) and .py (a PyTorch worker',
            'process). A .py candidate cannot be captured into a CUDA graph, so when the set holds one, every run',
            '(baseline included) decodes eagerly and the record says why (graphs: false, graphsReason).',
          ].join('\n'),
        ),
    handler: (argv: E2eArgs) => runE2e(argv, io, rawArgs),
  };
}

