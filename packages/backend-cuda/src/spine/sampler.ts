/**
 * The sampler on the CUDA backend (kernels/sampler.cu): Ops.sample's exact algorithm (greedy / temperature /
 * top-k / top-p / seeded exponential race over core's counterUniform), one block per row. logits [B, V] are read
 * as f32 (other float dtypes are converted, exactly for bf16/f16); temperature f32, topK i32, topP f32, seeds i64
 * (converted when given otherwise). Returns ids [B] (i64).
 * Differences from the CPU backend: a temperature that is negative or NaN samples greedily here (the CPU backend
 * throws; checking would need a host sync); float32 arithmetic may pick differently only at near-ties.
 */
import { Tensor, formatShape } from '@fastkernels/core';
import type { SpineContext } from './context.js';
import { asDType, disposeAll, ptr, rowsOf, spineKernel } from './common.js';

const THREADS = 512;

export function sample(ctx: SpineContext, logits: Tensor, temperature: Tensor, topK: Tensor, topP: Tensor, seeds: Tensor): Tensor {
  const op = 'sample';
  if (logits.rank !== 2) throw new RangeError(`${op}: logits ${formatShape(logits.shape)} must be [B, V]`);
  if (logits.dtype !== 'f32' && logits.dtype !== 'bf16' && logits.dtype !== 'f16' && logits.dtype !== 'f64') throw new TypeError(`${op}: logits have dtype ${logits.dtype}; expected a float dtype`);
  const [B, V] = logits.shape as [number, number];
  for (const [name, t] of [['temperature', temperature], ['topK', topK], ['topP', topP], ['seeds', seeds]] as const) {
    if (t.numel !== B) throw new RangeError(`${op}: ${name} ${formatShape(t.shape)} must have ${B} entries (one per row)`);
  }
  if (V === 0) throw new RangeError(`${op}: logits ${formatShape(logits.shape)} have an empty vocabulary`);
  const out = Tensor.empty(logits.backend, [B], 'i64', { device: logits.device });
  if (B === 0) return out;
  const temps: Tensor[] = [];
  try {
    const l = rowsOf(logits.dtype === 'f32' ? logits : asDType(logits, 'f32', temps), temps);
    const temp = asDType(temperature, 'f32', temps);
    const k = asDType(topK, 'i32', temps);
    const p = asDType(topP, 'f32', temps);
    const s = asDType(seeds, 'i64', temps);
    const vec4 = ptr(l.t) % 16 === 0 && (B === 1 || l.rowStride % 4 === 0) ? 1 : 0;
    const kern = spineKernel(ctx, 'sampler.cu', 'fk_sample', { FK_VEC4: vec4 });
    kern.launch(B, THREADS, 0, [out, l.t, l.rowStride, V, temp, k, p, s]);
    return out;
  } finally {
    disposeAll(temps);
  }
}
