import { existsSync, statSync } from 'node:fs';
import { UserError } from '@fastkernels/core';
import { captureWorkload, checkWorkload, loadModelFolderConfig, resolveWorkload } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { environment, selectBackend } from '../env.js';
import type { Io } from '../io.js';
import { captureCommonFlags, printCaptureSummary, type CaptureCommonArgs, type FolderCaptureRunner } from './capture-common.js';
import { CAPTURE_DOCUMENTS, runEncoderCapture, type EncoderCaptureArgs } from './capture-encoder.js';
import { runPipelineCapture, type PipelineCaptureArgs } from './capture-pipeline.js';
import { runVisionCapture, visionCaptureFlags, type VisionCaptureArgs } from './capture-vision.js';
import { dtypeFlag, engineFlags, engineOptions, modelSource, type EngineArgs } from './e2e.js';
import { encoderFlags, isEncoderFolder } from './e2e-encoder.js';
import { isPipelineFolder, pipelineFlags } from './e2e-pipeline.js';
import { isVisionFolder } from './e2e-vision.js';

export interface CaptureArgs extends EngineArgs, CaptureCommonArgs, PipelineCaptureArgs, VisionCaptureArgs, EncoderCaptureArgs {
  workload: string;
}

/**
 * The folders that are not LLMs, each with its runner; the first kind the folder is runs it. Pipeline folders
 * (FLUX.1): text-to-image requests instead of an LLM workload; vision (YOLOv10, ConvNeXt-V2): one batch of seeded
 * noise images per --batch-sizes; encoders (BGE-M3, ColBERTv2): seeded documents through the packed encoder runner.
 */
const FOLDER_RUNNERS: readonly { readonly is: (dir: string) => boolean; readonly run: FolderCaptureRunner<CaptureArgs> }[] = [
  { is: isPipelineFolder, run: runPipelineCapture },
  { is: isVisionFolder, run: runVisionCapture },
  { is: isEncoderFolder, run: runEncoderCapture },
];

/**
 * `fastkernels capture`: run a workload through the engine (eagerly) with every registry-built module
 * instrumented, and write OUT/index.json (core's CaptureIndexSchema) + OUT/values.safetensors — the cases
 * `fastkernels bench --captures OUT` times.
 */
export function runCapture(argv: CaptureArgs, io: Io): void {
  if (existsSync(argv.out) && !statSync(argv.out).isDirectory()) throw new UserError(`${argv.out} exists and is not a folder`, { field: '--out' });
  const env = environment();
  const backend = selectBackend(env, argv.backend);
  const folder = FOLDER_RUNNERS.find((r) => r.is(argv.model));
  if (folder) return folder.run(argv, io, backend, env.registry, dtypeFlag(argv));
  const log = (l: string) => io.err(`${l}\n`);
  const engine = engineOptions({ ...argv, graphs: false }, log);
  const src = modelSource(argv.model, backend, argv);
  const g = loadModelFolderConfig(argv.model).geometry;
  const workload = resolveWorkload(argv.workload, g.vocabSize);
  checkWorkload(workload, g.vocabSize, engine.maxModelLen ?? Math.min(g.maxPositionEmbeddings, 4096));
  const startedAt = performance.now();
  const r = captureWorkload({ baseline: env.registry, load: (reg) => src.load(reg), workload, engine, outDir: argv.out, model: src.name });
  printCaptureSummary(io, argv, r, { model: src.name, workload: workload.name, what: `${workload.requests.length} requests (${r.outputTokens} output tokens)`, startedAt });
}

/** The LLM capture's own flag with its help. */
function llmCaptureFlags<T>(y: Argv<T>) {
  return y.option('workload', { type: 'string', default: 'synthetic:64:100-1024:16-128:0', describe: 'a JSONL file ({"prompt_ids": [...], "output_len": N} per line) or synthetic:N:IN_LO-IN_HI:OUT_LO-OUT_HI:SEED' });
}

export function captureCommand(io: Io) {
  return {
    command: 'capture',
    describe: 'Record every module\'s init args, forward shapes (with counts) and data-dependent input values from a real engine run: the cases bench reads',
    // in --help: the engine's flags, the common ones, the LLM workload, then the pipeline, vision and encoder folders'
    builder: (y: Argv) =>
      encoderFlags(visionCaptureFlags(pipelineFlags(llmCaptureFlags(captureCommonFlags(engineFlags(y))))), CAPTURE_DOCUMENTS)
        .example('$0 capture --model ./llama3-8b --out captures/llama3-8b', 'the default synthetic workload')
        .example('$0 capture --model ./tiny --backend cpu --workload synthetic:4:8-32:4-8:0 --out /tmp/cap', 'a small capture on the CPU')
        .example('$0 capture --model ./bge-m3 --documents 64 --lengths 32-512 --out captures/bge-m3', 'an encoder folder: the tasks of packed embedding batches')
        .example('$0 capture --model packages/model-zoo/fixtures/tiny-flux --backend cpu --size 32 --steps 2 --out /tmp/cap-flux', 'a FLUX pipeline folder: the tasks of a text-to-image run'),
    handler: (argv: CaptureArgs) => runCapture(argv, io),
  };
}
