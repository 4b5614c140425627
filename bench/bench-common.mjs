// What the bench scripts (bench/*.mjs, bundled by tools/gpu-host-bundle.mjs) share: flag parsing, the CUDA backend or
// a clear exit, and the launch settings a timing depends on (recorded in each JSON).
import { CudaBackend, ATTENTION_TUNING, LAUNCH_TUNING, LINEAR_TUNING, ROTARY_TUNING, SAMPLER_TUNING } from '@fastkernels/backend-cuda';
import { chainDecodeDefault } from '@fastkernels/model-zoo';

/** `--name value` and `--flag` lookups over argv (default: this process's arguments). */
export function benchArgs(argv = process.argv.slice(2)) {
  return {
    args: argv,
    opt: (name, def) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : def),
    has: (name) => argv.includes(name),
  };
}

/** A CUDA backend, or exit 2 with why CUDA is unavailable (no GPU, no driver, a library not found). */
export function cudaBackendOrExit(label) {
  const backend = new CudaBackend();
  const avail = backend.availability();
  if (!avail.available) {
    console.error(`${label}: CUDA unavailable: ${avail.reason}`);
    process.exit(2);
  }
  return backend;
}

/**
 * The speed settings in force (defaults, or FASTKERNELS_PDL / _PDL_EAGER / _CHAIN_DECODE / _GEMV_MAX_ROWS), for the
 * JSON's settings. chainDecode is the engine's default; the engine itself chains only graph decode at world size 1.
 */
export function launchSettings() {
  return {
    pdl: LAUNCH_TUNING.pdl,
    pdlEager: LAUNCH_TUNING.pdlEager,
    chainDecode: chainDecodeDefault(),
    gemvMaxRows: LINEAR_TUNING.gemvMaxRows,
    gemvStream: LINEAR_TUNING.gemvStream,
    gemvStreamWarpsPerSm: LINEAR_TUNING.gemvStreamWarpsPerSm,
    gemvUnroll: LINEAR_TUNING.gemvUnroll,
    gemvFuseGlu: LINEAR_TUNING.gemvFuseGlu,
    rotaryBlocksPerSm: ROTARY_TUNING.blocksPerSm,
    fuseRotaryKv: ROTARY_TUNING.fuseKvStore,
    samplerGreedySplitMaxRows: SAMPLER_TUNING.greedySplitMaxRows,
    decodeMmaWarps: ATTENTION_TUNING.decodeMmaWarps,
    decodeMmaMinSplitTokens: ATTENTION_TUNING.decodeMmaMinSplitTokens,
    decodeMmaStages: ATTENTION_TUNING.decodeMmaStages,
    decodeMmaCtasPerSm: ATTENTION_TUNING.decodeMmaCtasPerSm,
  };
}
