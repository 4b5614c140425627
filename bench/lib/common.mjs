// What the suites' drivers (bench/suites/*/*.mjs, bundled by tools/gpu-host-bundle.mjs) share: flag parsing, the CUDA backend or
// a clear exit, and the launch settings a timing depends on (recorded in each JSON).
import { CudaBackend, effectiveTuning } from '@fastkernels/backend-cuda';
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
 * The speed settings in force, for the JSON's settings: chained decode (the engine's default; it chains only graph
 * decode at world size 1) by name, the effective tuning whole (the device's tuning file with FASTKERNELS_TUNING laid
 * over it), so a key added there is recorded without a change here, and the files it came from.
 */
export function launchSettings() {
  const e = effectiveTuning();
  return { chainDecode: chainDecodeDefault(), tuning: e.tuning, tuningFiles: { device: e.deviceFile, override: e.overrideFile ?? null } };
}
