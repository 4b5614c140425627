// What the suites' drivers (bench/suites/*/*.mjs, bundled by tools/gpu-host-bundle.mjs) share: flag parsing, the CUDA backend or
// a clear exit, and the launch settings a timing depends on (recorded in each JSON).
import * as cuda from '@fastkernels/backend-cuda';
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
  const backend = new cuda.CudaBackend();
  const avail = backend.availability();
  if (!avail.available) {
    console.error(`${label}: CUDA unavailable: ${avail.reason}`);
    process.exit(2);
  }
  return backend;
}

/**
 * The speed settings in force, for the JSON's settings: chained decode (the engine's default; it chains only graph
 * decode at world size 1) by name, and the CUDA backend's tuning whole, so a knob added there is recorded without a
 * change here: the effective tuning (device file + FASTKERNELS_TUNING override, with where each value came from) where
 * the backend has tuning files, else its per-section *_TUNING objects.
 */
export function launchSettings() {
  const api = cuda; // looked up at run time: either API may be the one this build has
  if (typeof api.effectiveTuning === 'function') {
    const e = api.effectiveTuning();
    return { chainDecode: chainDecodeDefault(), tuning: e.tuning, tuningFiles: { device: e.deviceFile, override: e.overrideFile ?? null } };
  }
  const sections = { launch: 'LAUNCH', linear: 'LINEAR', attention: 'ATTENTION', rotary: 'ROTARY', norm: 'NORM', kvStore: 'KV_STORE', sampler: 'SAMPLER', softmax: 'SOFTMAX' };
  return { chainDecode: chainDecodeDefault(), tuning: Object.fromEntries(Object.entries(sections).map(([k, v]) => [k, { ...api[`${v}_TUNING`] }])) };
}
