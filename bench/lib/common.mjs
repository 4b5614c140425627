// What the suites' drivers (bench/suites/*/*.mjs, bundled by tools/gpu-host-bundle.mjs) share: flag parsing, the CUDA backend or
// a clear exit, and the launch settings a timing depends on (recorded in each JSON).
import { CudaBackend } from '@fastkernels/backend-cuda';

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
 * The speed settings in force, for the JSON's settings: the effective tuning whole (the device's tuning file with
 * FASTKERNELS_TUNING laid over it; a key added there is recorded with no change here), the files it came from, and
 * chained decode as the engine reads it (engine.chainDecode; the engine chains only graph decode at world size 1).
 * Takes the backend so its runtime has started and the device's own file (not the generic fallback) is the one read.
 */
export function launchSettings(backend) {
  if (typeof backend.tuning !== 'function') return { chainDecode: null, tuning: null, tuningFiles: null }; // the CPU backend: no launch choices
  const e = backend.tuning();
  return { chainDecode: e.tuning.engine.chainDecode, tuning: e.tuning, tuningFiles: { device: e.deviceFile, override: e.overrideFile ?? null } };
}
