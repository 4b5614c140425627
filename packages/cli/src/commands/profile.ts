/**
 * `fastkernels profile --model DIR`: where one forward's time goes, by task (L1..L4 module). The model is built from
 * an instrumented registry (profile/profiler.ts) and run eagerly: warm-ups, then --repeats profiled forwards, each
 * module forward timed by the backend's timer; per task (and input shapes with --by-shape): calls, inclusive and self
 * ms, the share of the forward, ms per call. The same batch on the un-instrumented model (eager and, where the runner
 * has them, as a CUDA graph) shows what profiling costs. Vision, encoder and causal-LM folders (an LM: one engine step,
 * a prefill of --tokens or a decode of --batch sequences, --phase).
 */
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { UserError, type Backend, type DType, type ModuleRegistry } from '@fastkernels/core';
import { loadModelFolderConfig, parseLengthRange } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { environment, selectBackend } from '../env.js';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';
import { HeadStart } from '../profile/head-start.js';
import { ModuleProfiler } from '../profile/profiler.js';
import { ProfileReportSchema, profileRows, renderProfile, type ProfileReport, type Timing } from '../profile/report.js';
import { loadLlmWorkload, type LlmPhase } from '../profile/llm-workload.js';
import { loadEncoderWorkload, loadVisionWorkload, type LoadedWorkload, type WorkloadSpec } from '../profile/workloads.js';

export interface ProfileArgs {
  model: string;
  backend: string;
  dtype?: string;
  batch?: number;
  lengths?: string;
  phase?: string;
  tokens?: number;
  warmups: number;
  repeats: number;
  top: number;
  byShape?: boolean;
  queueAhead?: boolean;
  json?: boolean;
  out?: string;
  seed: number;
}

const DTYPES: Record<string, DType> = { f32: 'f32', bf16: 'bf16', f16: 'f16' };
const DEFAULT_BATCH = { vision: 32, encoder: 64, llm: 32 } as const;
const DEFAULT_TOKENS = 512;
const DEFAULT_LENGTHS = 'U[32, 512]';
/** The encoder runner's sequences per forward (vLLM's max_num_seqs): one profiled forward holds the whole batch. */
const MAX_ENCODER_BATCH = 256;

export function profileCommand(io: Io) {
  return {
    command: 'profile',
    describe: "Where a model's forward time goes, by task (L1..L4 module): calls, inclusive / self ms, share, per call",
    builder: (y: Argv) =>
      y
        .option('model', { type: 'string', demandOption: true, describe: 'model folder: config.json (+ safetensors; seeded random weights without). Vision (YOLOv10, ConvNeXt-V2), encoder (BGE-M3, ColBERTv2, XLM-R) or causal LM (Llama, Qwen, Mixtral, ...)' })
        .option('backend', { type: 'string', choices: ['auto', 'cpu', 'cuda'], default: 'auto', describe: 'auto = cuda when available, else cpu' })
        .option('dtype', { type: 'string', choices: Object.keys(DTYPES), describe: "model dtype [default: the config's, else bf16]" })
        .option('batch', { type: 'number', describe: `images (vision), sequences (encoder) in the forward, or sequences in the LM's decode step [default: ${DEFAULT_BATCH.vision} images, ${DEFAULT_BATCH.encoder} sequences, ${DEFAULT_BATCH.llm} decodes]` })
        .option('lengths', { type: 'string', describe: `encoders: the sequences' lengths in tokens, LO-HI or U[LO, HI] (seeded, uniform) [default: ${DEFAULT_LENGTHS}]` })
        .option('phase', { type: 'string', choices: ['prefill', 'decode'], describe: 'causal LMs: the engine step to profile, one prefill of --tokens or one decode step of --batch sequences [default: decode]' })
        .option('tokens', { type: 'number', describe: `causal LMs: the prefill's prompt tokens; in decode, each sequence's context [default: ${DEFAULT_TOKENS}]` })
        .option('warmups', { type: 'number', default: 2, describe: 'untimed forwards before the timed ones (each of: un-instrumented eager, graphs, profiled)' })
        .option('repeats', { type: 'number', default: 5, describe: 'timed forwards; the table is their mean' })
        .option('top', { type: 'number', default: 25, describe: 'rows in the table (the rest sum into one "other" row); --json has them all' })
        .option('by-shape', { type: 'boolean', default: false, describe: "a row per task, input shapes and the module's own weight shape (e.g. each conv shape on its own)" })
        .option('queue-ahead', { type: 'boolean', describe: 'CUDA, vision: queue ~3x the launch time of matmuls before each profiled forward, so its kernels run back to back and module times are device time without launch gaps (--no-queue-ahead: as launched) [default: on there]' })
        .option('json', { type: 'boolean', default: false, describe: 'print the report as one JSON document on stdout (instead of the table)' })
        .option('out', { type: 'string', describe: 'also write the JSON report to this file (the table still prints)' })
        .option('seed', { type: 'number', default: 0, describe: 'seed of the inputs (images, token ids) and of random weights' })
        .example('$0 profile --model yolov10n --backend cuda --dtype f16 --batch 32', 'YOLOv10n, 32 images at 640: which tasks hold the time')
        .example('$0 profile --model yolov10n --batch 32 --by-shape --top 40 --out yolo.json', 'a row per conv shape; the whole report in yolo.json')
        .example('$0 profile --model convnextv2-base --dtype f16 --batch 32', 'a classifier')
        .example("$0 profile --model bge-m3 --dtype bf16 --batch 64 --lengths 'U[32, 512]' --json > bge.json", 'an encoder: 64 documents in one packed forward')
        .example('$0 profile --model llama-3-8b --phase prefill --tokens 2048', 'a causal LM: one 2048-token prefill step')
        .example('$0 profile --model llama-3-8b --phase decode --batch 64 --tokens 1024', 'a causal LM: one decode step of 64 sequences at 1024 tokens of context')
        .example('$0 profile --model packages/model-zoo/fixtures/tiny-yolov10 --backend cpu --batch 2', 'the tiny fixture on the CPU (random weights)')
        .epilog(
          [
            "Profiled forwards run EAGERLY (CUDA graphs off: a graph replay calls no module forward), every module wrapped and timed by the backend's timer (device events on CUDA, the host clock on the CPU). Milliseconds are per forward, the mean of --repeats. self = a module's time less its children's; '(outside modules)' is what no module covers (the runner's glue).",
            "Caveat: wrapping a module replaces its class's forward, so a layer that fuses its children (runsOwnForward, e.g. an MLP running gate/up + SiLU as one kernel) runs them unfused here: the children carry the time, and the header's un-instrumented eager forward (the real model, fusions on) shows what fusing saves.",
            "Reading it: the gap between the un-instrumented eager and graphs forwards is launch overhead; 'host self ms' is each module's launch cost on the host. On CUDA a vision forward is profiled behind a head start (--queue-ahead: matmuls queued first, so its kernels run back to back as in a graph replay and self ms is device time, not launch gaps; the header says whether it held). Without it, 'host self ms' near or above 'self ms' marks a launch-bound module. With --by-shape, each task's calls split by their input shapes (e.g. one row per conv shape).",
            "Causal LMs: the unit is one step of the paged engine (schedule, forward, LM head, sampling, tokens read back), run without overlap or chained decode; the header's graphs time is the captured decode step (prefills always run eagerly).",
          ].join('\n\n'),
        ),
    handler: (argv: ProfileArgs) => void runProfile(argv, io),
  };
}

/** The command's body (tests call it with a captured Io). */
export function runProfile(argv: ProfileArgs, io: Io): ProfileReport {
  const warmups = intFlag('warmups', argv.warmups, 0, 1000);
  const repeats = intFlag('repeats', argv.repeats, 1, 10000);
  const top = intFlag('top', argv.top, 1, 100000);
  const seed = intFlag('seed', argv.seed, 0, 2 ** 32 - 1);
  if (argv.out !== undefined && existsSync(argv.out) && statSync(argv.out).isDirectory()) throw new UserError(`${argv.out} is a folder`, { field: '--out', fix: 'pass a file name, e.g. --out profile.json' });
  const { kind, loader, batch, phase, tokens, lengths } = resolveWorkload(argv, seed, warmups + repeats);
  const env = environment();
  const backend = selectBackend(env, argv.backend);
  const load = (registry: ModuleRegistry, graphs: boolean) => loader(backend, registry, graphs);
  const queueAhead = queueAheadFlag(argv.queueAhead, kind, backend);
  const log = (l: string) => io.err(`profile: ${l}\n`);
  const device = 0;
  const timeOf = (forward: () => void): Timing => {
    for (let i = 0; i < warmups; i++) forward();
    const timer = backend.createTimer(device);
    const ms: number[] = [];
    for (let i = 0; i < repeats; i++) {
      backend.synchronize(device);
      timer.start();
      forward();
      timer.stop();
      backend.synchronize(device);
      ms.push(timer.elapsedMs());
    }
    return { mean_ms: Math.max(0, ms.reduce((a, b) => a + b, 0) / ms.length), min_ms: Math.max(0, Math.min(...ms)), runs: ms.length };
  };

  // the un-instrumented model first (eager, then graphs), one model in memory at a time
  log(`loading ${argv.model} (${kind}) on ${backend.name}, un-instrumented`);
  const plain = load(env.registry, true);
  let eager: Timing;
  let graphs: Timing | null = null;
  const graphsNote = typeof plain.graphs === 'string' ? plain.graphs : undefined;
  try {
    eager = timeOf(plain.eager);
    if (typeof plain.graphs === 'function') graphs = timeOf(plain.graphs);
  } finally {
    plain.dispose();
  }
  log(`un-instrumented: eager ${eager.mean_ms.toFixed(3)} ms${graphs ? `, graphs ${graphs.mean_ms.toFixed(3)} ms` : ''}; profiling ${repeats} forward${repeats === 1 ? '' : 's'}`);

  const profiler = new ModuleProfiler(env.registry, { backend, device }, { byShape: Boolean(argv.byShape) });
  const w = load(profiler.registry, false);
  const profiledMs: number[] = [];
  let headStart: HeadStart | null = null;
  let held = 0;
  try {
    let launchMs = 0;
    for (let i = 0; i < Math.max(warmups, queueAhead ? 1 : 0); i++) {
      const t0 = performance.now();
      w.eager();
      launchMs = Math.max(launchMs, performance.now() - t0);
      backend.synchronize(device);
    }
    if (queueAhead) {
      headStart = new HeadStart(backend, device);
      headStart.calibrate(Math.max(20, 3 * launchMs));
      log(`queueing ${headStart.leadMs.toFixed(1)} ms of matmuls ahead of each profiled forward (its launch took ${launchMs.toFixed(1)} ms on the host)`);
    }
    for (let i = 0; i < repeats; i++) {
      const hs = headStart;
      profiledMs.push(profiler.profile(w.eager, hs ? (launch) => void (hs.run(launch).held && held++) : undefined));
    }
  } finally {
    headStart?.dispose();
    w.dispose();
  }
  const totals = profiler.result();
  const whole = Math.max(totals.forwardMs, Number.MIN_VALUE);
  const report = ProfileReportSchema.parse({
    schema_version: 1,
    task: 'profile',
    model: argv.model,
    architecture: w.architecture,
    kind,
    backend: backend.name,
    device: backend.devices()[device]?.name ?? backend.name,
    dtype: w.dtype,
    weights: w.weights,
    workload: {
      batch, seed, description: w.description,
      ...(w.imageSize !== undefined ? { image_size: w.imageSize } : {}),
      ...(lengths ? { lengths } : {}),
      ...(w.tokens !== undefined ? { tokens: w.tokens } : {}),
      ...(kind === 'llm' ? { phase, prompt_tokens: tokens } : {}),
    },
    warmups, repeats, by_shape: Boolean(argv.byShape),
    timer: backend.name === 'cuda' ? 'device events' : 'host clock',
    profiled_graphs: false,
    forward: {
      profiled: { mean_ms: Math.max(0, totals.forwardMs), min_ms: Math.max(0, Math.min(...profiledMs)), runs: profiledMs.length },
      eager,
      graphs,
      ...(graphsNote ? { graphs_note: graphsNote } : {}),
    },
    queue_ahead: headStart ? { lead_ms: headStart.leadMs, held, of: repeats } : null,
    unattributed_ms: totals.unattributedMs,
    unattributed_share: totals.unattributedMs / whole,
    tasks: profileRows(totals),
  } satisfies ProfileReport);
  const text = JSON.stringify(report, null, 2) + '\n';
  if (argv.out !== undefined) {
    try {
      mkdirSync(dirname(resolve(argv.out)), { recursive: true });
      writeFileSync(argv.out, text);
    } catch (e) {
      throw new UserError(`cannot write ${argv.out}: ${(e as Error).message}`, { field: '--out', fix: 'pass a writable file path' });
    }
  }
  io.out(argv.json ? text : renderProfile(report, top));
  return report;
}

type Kind = 'vision' | 'encoder' | 'llm';

/**
 * What one profiled forward is for this folder: its kind (from config.json's architecture), the flags that apply to
 * it checked (one that does not is a UserError naming it), and how to load it from a registry.
 */
function resolveWorkload(argv: ProfileArgs, seed: number, steps: number) {
  if (existsSync(join(argv.model, 'model_index.json')) && !existsSync(join(argv.model, 'config.json'))) {
    throw new UserError(`${argv.model} is a diffusers pipeline (model_index.json); profile runs one model, and pipelines (FLUX) are not profiled yet`, { field: '--model', fix: 'pass a vision, encoder or causal-LM folder (with a config.json)' });
  }
  const { architecture } = loadModelFolderConfig(argv.model);
  const runner = architecture.runner;
  if (runner !== 'vision' && runner !== 'encoder' && runner !== 'decoder-llm') {
    throw new UserError(`${argv.model} is a ${runner} model (${architecture.name}); profile runs vision, encoder and causal-LM models`, { field: '--model', fix: 'pass a vision (YOLOv10, ConvNeXt-V2), encoder (BGE-M3, ColBERTv2) or causal LM (Llama, ...) folder' });
  }
  const kind: Kind = runner === 'decoder-llm' ? 'llm' : runner;
  const what = kind === 'llm' ? 'a causal LM' : kind === 'encoder' ? 'an encoder model' : 'a vision model';
  const notFor = (flag: string, fix: string) => new UserError(`does not apply to ${what} (${architecture.name})`, { field: flag, fix });
  if (kind !== 'encoder' && argv.lengths !== undefined) throw notFor('--lengths', kind === 'vision' ? "drop --lengths: a vision model runs images at its config's input size (--batch: images per forward)" : 'drop --lengths: pass --tokens (the prompt) and --phase');
  if (kind !== 'llm' && argv.phase !== undefined) throw notFor('--phase', "drop --phase: it picks a causal LM's prefill or decode step");
  if (kind !== 'llm' && argv.tokens !== undefined) throw notFor('--tokens', kind === 'encoder' ? "drop --tokens: pass --lengths for the sequences' lengths" : 'drop --tokens: a vision model runs images (--batch)');
  const phase: LlmPhase = argv.phase === 'prefill' ? 'prefill' : 'decode';
  if (kind === 'llm' && phase === 'prefill' && argv.batch !== undefined) throw new UserError('does not apply to --phase prefill (one sequence of --tokens)', { field: '--batch', fix: 'drop --batch, or pass --phase decode' });
  const asked = argv.batch === undefined ? DEFAULT_BATCH[kind] : intFlag('batch', argv.batch, 1, kind === 'encoder' ? MAX_ENCODER_BATCH : 1024);
  const batch = kind === 'llm' && phase === 'prefill' ? 1 : asked;
  const tokens = kind === 'llm' ? intFlag('tokens', argv.tokens ?? DEFAULT_TOKENS, 1, 1 << 20) : 0;
  const lengths = kind === 'encoder' ? parseLengthRange(argv.lengths ?? DEFAULT_LENGTHS) : undefined;
  const loader = (backend: Backend, registry: ModuleRegistry, graphs: boolean): LoadedWorkload => {
    const spec: WorkloadSpec = { dir: argv.model, backend, batch, seed, ...(argv.dtype ? { dtype: DTYPES[argv.dtype]! } : {}), ...(lengths ? { lengths } : {}) };
    return kind === 'vision' ? loadVisionWorkload(spec, registry, graphs) : kind === 'encoder' ? loadEncoderWorkload(spec, registry) : loadLlmWorkload({ ...spec, phase, tokens, steps }, registry, graphs);
  };
  return { kind, loader, batch, phase, tokens, lengths };
}

/**
 * --queue-ahead: on by default where it works (a vision forward on CUDA: launched asynchronously, nothing waiting on
 * the host inside); asked for elsewhere, a UserError saying why it cannot hold.
 */
function queueAheadFlag(asked: boolean | undefined, kind: Kind, backend: Backend): boolean {
  const works = kind === 'vision' && backend.name === 'cuda';
  if (asked && !works) {
    const why = backend.name !== 'cuda' ? `the ${backend.name} backend runs every op before it returns: nothing can be queued ahead` : 'its step uploads its inputs first, and that copy waits for whatever is queued';
    throw new UserError(`does not apply to ${kind === 'vision' ? 'a vision model' : kind === 'encoder' ? 'an encoder model' : 'a causal LM'} on ${backend.name}: ${why}`, { field: '--queue-ahead', fix: 'drop --queue-ahead' });
  }
  return asked ?? works;
}
