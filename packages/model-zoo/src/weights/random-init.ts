/**
 * Seeded random weights for a built module tree, through the same plan as loading (planWeights): each checkpoint
 * tensor's values depend only on the seed and its checkpoint name, so a model initialised here equals one loaded from
 * the checkpoint writeRandomCheckpoint writes for the same seed, on any number of tensor-parallel ranks.
 */
import { Rng, Tensor, UserError, currentTensorParallelGroup, fmix32, numel, type Module, type ShardSlice } from '@fastkernels/core';
import { encodeValues } from './encode.js';
import { tensorDraws, type TensorDraw } from './init-scale.js';
import { checkPlanFits, targetRows } from './load-weights.js';
import { loadableParameters, mappedShape, planWeights, type TensorKind, type TensorParallelRank, type WeightMapping, type WeightRules } from './weight-plan.js';

/** A per-tensor seed from the run seed and the tensor name (order-independent, stable). */
export function tensorSeed(seed: number, name: string): number {
  let h = fmix32(seed >>> 0);
  for (let i = 0; i < name.length; i++) h = fmix32((h ^ name.charCodeAt(i)) >>> 0);
  return h;
}

/**
 * Seeded values of one checkpoint tensor: matrices N(0, std^2) (HF's init), norm weights 1 + N(0, std^2) and biases
 * N(0, std^2) (HF uses 1 and 0; the noise makes random models exercise every parameter).
 */
export function randomTensorValues(m: Pick<WeightMapping, 'hfName' | 'shape' | 'kind'>, std: number, seed: number): Float64Array {
  const v = new Rng(tensorSeed(seed, m.hfName)).fillNormal(numel(m.shape), std);
  if (m.kind === 'norm') for (let i = 0; i < v.length; i++) v[i]! += 1;
  return v;
}

/** A tensor's seeded values under its draw (init-scale.ts); the fixed mode's draw gives randomTensorValues' values. */
export function drawValues(m: Pick<WeightMapping, 'hfName' | 'shape'>, draw: TensorDraw, seed: number): Float64Array {
  const n = numel(m.shape);
  if ('constant' in draw) return new Float64Array(n).fill(draw.constant);
  const rng = new Rng(tensorSeed(seed, m.hfName));
  if ('uniform' in draw) return rng.fillUniform(n, -draw.uniform, draw.uniform);
  if ('integers' in draw) {
    const [lo, hi] = draw.integers;
    const v = new Float64Array(n);
    for (let i = 0; i < n; i++) v[i] = rng.int(lo, hi);
    return v;
  }
  const v = rng.fillNormal(n, draw.normal);
  if (draw.mean) for (let i = 0; i < n; i++) v[i]! += draw.mean;
  return v;
}

/** The values of `slice` from the full tensor's values (row-major), in the slice's own row-major order. */
function sliceValues(values: Float64Array, shape: readonly number[], slice: ShardSlice): Float64Array {
  const inner = shape.slice(1).reduce((a, b) => a * b, 1);
  if (slice.dim === 0) return values.subarray(slice.start * inner, (slice.start + slice.length) * inner);
  const [rows, cols] = shape as [number, number];
  const out = new Float64Array(rows * slice.length);
  for (let r = 0; r < rows; r++) out.set(values.subarray(r * cols + slice.start, r * cols + slice.start + slice.length), r * slice.length);
  return out;
}

/**
 * Give a built model seeded random weights (the values writeRandomCheckpoint writes for this seed); a tensor-parallel
 * rank draws each whole tensor (one at a time) and keeps its slice, so every rank holds a shard of the same model.
 */
export function initWeightsRandom(model: Module, rules: WeightRules, seed: number, tp: TensorParallelRank = currentTensorParallelGroup()): void {
  const params = loadableParameters(model, rules);
  const plan = planWeights(model, rules, tp);
  checkPlanFits(plan, params);
  const drawOf = tensorDraws(plan, rules);
  for (const m of plan) {
    const values = drawValues(m, drawOf(m), seed);
    const param = params.get(m.target)!;
    const shape = mappedShape(m);
    const src = Tensor.fromArray(param.backend, m.slice ? sliceValues(values, m.shape, m.slice) : values, shape, param.dtype, { device: param.device });
    const dst = targetRows(param, m);
    dst.copy_(src);
    dst.dispose();
    src.dispose();
  }
}

/** Elements of the device pools of initWeightsOnDevice (a prime, so tiles do not line up with rows). */
export const DEVICE_INIT_POOL = 4_194_301;

/**
 * The pool length for a plan: DEVICE_INIT_POOL, or the largest tensor when none is that long. (Not the smallest: a pool
 * as short as a norm vector tiles every matrix row from the same few thousand values, and a one-element tensor made
 * BGE-M3's 256M-value embedding one copy per element — the JS heap ran out.)
 */
export function poolSize(plan: readonly Pick<WeightMapping, 'shape'>[]): number {
  let largest = 1;
  for (const m of plan) largest = Math.max(largest, numel(m.shape));
  return Math.min(DEVICE_INIT_POOL, largest);
}

const POOL_SALT: Readonly<Record<TensorKind, number>> = { matrix: 0x6d617472, bias: 0x62696173, norm: 0x6e6f726d };

/** The seeded pool of one kind: N(0, std^2) values (norm weights: 1 + that). */
export function poolValues(std: number, seed: number, N: number, kind: TensorKind): Float64Array {
  const v = new Rng(fmix32((seed ^ POOL_SALT[kind]) >>> 0)).fillNormal(N, std);
  if (kind === 'norm') for (let i = 0; i < N; i++) v[i]! += 1;
  return v;
}

/** How a tensor is tiled from its pool: [pool offset, length] runs, in order, from a per-tensor rotation. */
export function poolSegments(m: Pick<WeightMapping, 'hfName' | 'shape'>, seed: number, N: number): [number, number][] {
  const out: [number, number][] = [];
  const total = numel(m.shape);
  let rot = tensorSeed(seed, m.hfName) % N;
  for (let off = 0; off < total; ) {
    const len = Math.min(total - off, N - rot);
    out.push([rot, len]);
    off += len;
    rot = (rot + 1_048_573) % N;
  }
  return out;
}

/**
 * Seeded random weights filled on the device, for models too big to draw on the host (Llama-3-8B: 8e9 values; the host
 * path takes minutes). Three pools of DEVICE_INIT_POOL values are drawn on the host once (matrices, biases, norm
 * weights), uploaded in the model dtype, and each tensor is tiled from its pool by device copies, starting at an offset
 * hashed from the seed and the checkpoint name and jumping by another prime after each tile. Same distribution and
 * scale as initWeightsRandom, not the same values (and periodic over the pool): for speed benchmarks and smoke runs,
 * not for parity with a checkpoint. Tied tensors get identical values (the same name, hence offset).
 */
export function initWeightsOnDevice(model: Module, rules: WeightRules, seed: number): { tensors: number; copies: number } {
  // fan-in init scales each tensor on its own: the pools cannot serve it, and the models using it (conv nets) are small
  if (rules.init) {
    initWeightsRandom(model, rules, seed);
    return { tensors: planWeights(model, rules).length, copies: 0 };
  }
  const world = currentTensorParallelGroup().world;
  if (world > 1) {
    // The pools tile whole tensors; a rank's slice of that tiling is not implemented.
    throw new UserError(`device random init fills whole tensors; under tensor parallelism (${world} ranks) use a checkpoint or host random init`, {
      field: '--random-init',
      fix: 'write a checkpoint with `fastkernels init-weights` and pass it with --model, or use --random-init host',
    });
  }
  const params = loadableParameters(model, rules);
  const plan = planWeights(model, rules, { rank: 0, world: 1 });
  checkPlanFits(plan, params);
  // integer tensors (MXFP4 blocks / scales) are drawn on the host, as initWeightsRandom does: no pool of their kind
  const drawOf = tensorDraws(plan, rules);
  const first = [...params.values()].find((p) => !plan.some((m) => m.dtype && params.get(m.target) === p));
  if (!first) return { tensors: 0, copies: 0 };
  const { backend, device, dtype } = first;
  const N = poolSize(plan);
  const draw = (kind: TensorKind) => {
    const v = poolValues(rules.initStd, seed, N, kind);
    const t = Tensor.empty(backend, [N], dtype, { device });
    if (dtype === 'bf16' || dtype === 'f32') backend.write(t.storage, t.offset * t.itemsize, encodeValues(v, dtype));
    else {
      const src = Tensor.fromArray(backend, v, [N], dtype, { device });
      t.copy_(src);
      src.dispose();
    }
    return t;
  };
  const pools = { matrix: draw('matrix'), bias: draw('bias'), norm: draw('norm') };
  let copies = 0;
  try {
    for (const m of plan) {
      const param = params.get(m.target)!;
      if (param.backend !== backend || param.device !== device) throw new Error(`initWeightsOnDevice: ${m.target} is on another backend or device`);
      if (m.dtype) {
        const src = Tensor.fromArray(backend, drawValues(m, drawOf(m), seed), m.shape, param.dtype, { device });
        const dst = targetRows(param, m);
        dst.copy_(src);
        dst.dispose();
        src.dispose();
        copies++;
        continue;
      }
      const rows = targetRows(param, m);
      const flat = rows.view([rows.numel]);
      const pool = pools[m.kind];
      let off = 0;
      for (const [start, len] of poolSegments(m, seed, N)) {
        const dst = flat.narrow(0, off, len);
        const src = pool.narrow(0, start, len);
        dst.copy_(src);
        dst.dispose();
        src.dispose();
        copies++;
        off += len;
      }
      flat.dispose();
      rows.dispose();
    }
  } finally {
    for (const p of Object.values(pools)) p.dispose();
  }
  return { tensors: plan.length, copies };
}
