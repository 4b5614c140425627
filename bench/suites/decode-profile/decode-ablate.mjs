// Issue 7, bs-1 decode: what a class of small kernels costs inside the captured step, as an upper bound on what fusing
// it away can save. A timing diagnostic only: ablateOps replaces the named ops of one backend with stand-ins that
// allocate their outputs (right shapes and dtypes) and launch nothing, so the decode graph is captured without those
// kernels. Every output after the first stand-in is garbage; only the step time means anything.
// Used by bench/decode_profile.mjs (--ablate, or FASTKERNELS_BENCH_ABLATE for the A/B bench:
// `suites/decode-ab/run.sh BENCH_ABLATE=rmsNorm:fusedAddRmsNorm`).
import { Tensor, UserError } from '@fastkernels/core';

const like = (t) => Tensor.empty(t.backend, t.shape, t.dtype, { device: t.device });

/**
 * The ops that may be ablated, each with its launch-free stand-in. The fused rotary + KV write never declines here, so
 * ablating it takes the step's rotary and cache write out whatever rotary.fuseKvStore (the tuning file) says; rotaryEmbedding
 * and storeKvcache_ are the unfused pair's.
 */
export const ABLATABLE = {
  rmsNorm: (x) => like(x),
  fusedAddRmsNorm: (x) => [like(x), like(x)],
  rotaryStoreKvcache: (_positions, query, key) => [like(query), like(key)],
  rotaryEmbedding: (_positions, query, key) => [like(query), key ? like(key) : null],
  storeKvcache_: () => {},
  pagedDecodeAttention: (query) => like(query),
};

/** Op names from a list (',' or ':' between names); a name not in ABLATABLE is a UserError naming the choices. */
export function parseAblate(text) {
  const names = (text ?? '').split(/[,:]/).map((s) => s.trim()).filter(Boolean);
  for (const n of names) {
    if (!Object.hasOwn(ABLATABLE, n)) {
      throw new UserError(`cannot ablate '${n}': choose from ${Object.keys(ABLATABLE).join(', ')}`, {
        field: '--ablate / FASTKERNELS_BENCH_ABLATE',
        fix: `name ops from that list, split by ',' or ':' (e.g. rmsNorm:fusedAddRmsNorm)`,
      });
    }
  }
  return names;
}

/**
 * Replace `names` on backend.ops with their stand-ins (instance properties shadowing the backend's methods). Returns
 * the calls each stand-in took so far: a name still at 0 after the run ablated nothing (the model took another path).
 */
export function ablateOps(backend, names) {
  const calls = Object.fromEntries(names.map((n) => [n, 0]));
  // a norm ablated: the fused norm + projection (Ops.rmsNormLinear, on at bs 1 on CUDA) declines, so the layers call the
  // norms (their stand-ins) and the projections on their own; the step then times the unfused projections without norms
  if (backend.ops.rmsNormLinear && (names.includes('rmsNorm') || names.includes('fusedAddRmsNorm'))) backend.ops.rmsNormLinear = () => null;
  for (const n of names) {
    const standIn = ABLATABLE[n];
    backend.ops[n] = (...args) => {
      calls[n]++;
      return standIn(...args);
    };
  }
  return calls;
}
