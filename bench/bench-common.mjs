// What the bench scripts (bench/*.mjs, bundled by tools/gpu-host-bundle.mjs) share: flag parsing, the CUDA backend or
// a clear exit, and the launch settings a timing depends on (recorded in each JSON).
import { CudaBackend, LAUNCH_TUNING, LINEAR_TUNING } from '@fastkernels/backend-cuda';
import { envSwitch } from '@fastkernels/core';

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
 * The speed settings in force (FASTKERNELS_PDL, FASTKERNELS_CHAIN_DECODE, FASTKERNELS_GEMV_MAX_ROWS), for the JSON's
 * settings.
 */
export function launchSettings() {
  return {
    pdl: LAUNCH_TUNING.pdl,
    chainDecode: envSwitch('FASTKERNELS_CHAIN_DECODE', true), // as the engine reads it (EngineOptions.chainDecode)
    gemvMaxRows: LINEAR_TUNING.gemvMaxRows,
    gemvStream: LINEAR_TUNING.gemvStream,
  };
}
