// GPU tests (tag `gpu`): real Triton through the host's Python, launched through backend-cuda's runtime.
// On the GPU host: `dist/gpu-host/run-gpu-tests triton` (bundled by tools/gpu-tests.mjs).
import { CudaBackend } from '@fastkernels/backend-cuda';
import { roundToDType, Tensor, withContext, type DType, type ModuleRegistry } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { Linear } from '../../../examples/candidates/triton-demo/L1/linear.js';
import { RMSNorm } from '../../../examples/candidates/triton-demo/L1/rms_norm.js';
import { Softmax } from '../../../examples/candidates/triton-demo/L1/softmax.js';
import { TritonCompileError } from './errors.js';
import { tritonAvailability } from './index.js';
import { clearLoadedTritonBinaries, tritonKernel } from './kernel.js';
import { TritonToolchain } from './toolchain.js';

const G = { tags: ['gpu'] };

let backend: CudaBackend | undefined;
function gpu(): CudaBackend {
  backend ??= new CudaBackend();
  const a = backend.availability();
  if (!a.available) throw new Error(`CUDA unavailable: ${a.reason}`);
  return backend;
}

function rand(n: number, seed: number, dtype: DType, scale = 1): number[] {
  let s = seed >>> 0;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out.push(roundToDType(((s / 4294967296) * 2 - 1) * scale, dtype));
  }
  return out;
}

/** Max |a - b| / (atol + rtol |b|) (<= 1 passes). */
function worst(a: ArrayLike<number>, b: ArrayLike<number>, atol: number, rtol: number): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let w = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    if (d === 0) continue; // exact: also with atol = rtol = 0 (0 / 0 would read as NaN)
    const r = d / (atol + rtol * Math.abs(b[i]!));
    if (!(r <= w)) w = Number.isNaN(r) ? Infinity : r;
  }
  return w;
}
const TOL: Partial<Record<DType, [number, number]>> = { f32: [1e-5, 1e-3], bf16: [1e-2, 1e-2], f16: [1e-2, 1e-2] };

const ADD = `import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)
`;

function ctxOf(dtype: DType) {
  return { backend: gpu(), device: 0, dtype, registry: {} as ModuleRegistry };
}

describe('Triton on the GPU host', () => {
  it('finds a Python with Triton', G, () => {
    const a = tritonAvailability();
    console.log(`     python ${a.python}, triton ${a.tritonVersion}${a.reason ? ` (${a.reason})` : ''}`);
    expect(a.available).toBe(true);
    const hello = TritonToolchain.get().hello();
    console.log(`     helper: ${JSON.stringify(hello)}`);
    expect(hello.triton).toBe(a.tritonVersion);
  });

  it('compiles an add kernel, launches it through the CUDA runtime and matches', G, () => {
    const b = gpu();
    const n = 98_432 + 7;
    const x = Tensor.fromArray(b, rand(n, 1, 'f32'), [n], 'f32');
    const y = Tensor.fromArray(b, rand(n, 2, 'f32'), [n], 'f32');
    const out = Tensor.empty(b, [n], 'f32');
    const k = tritonKernel({ source: ADD, fn: 'add_kernel', name: 'add.py', signature: ['*fp32:16', '*fp32:16', '*fp32:16', 'i32'], constexprs: { BLOCK_SIZE: 1024 } });
    const t0 = performance.now();
    k.launch((meta) => Math.ceil(n / (meta.BLOCK_SIZE as number)), [x, y, out, n]);
    const bin = k.binaries()[0]!;
    console.log(`     first launch ${(performance.now() - t0).toFixed(0)} ms (fromCache=${bin.fromCache}); kernel ${bin.compiled.name}, shared ${bin.compiled.shared}, warps ${bin.compiled.numWarps}`);
    console.log(`     params: ${bin.plan.params.map((p) => `${p.role === 'arg' ? p.argName : p.role}:${p.ptx.ptxType}`).join(', ')}`);
    console.log(`     metadata: scratch global ${bin.compiled.globalScratchSize}/${bin.compiled.globalScratchAlign}, profile ${bin.compiled.profileScratchSize}/${bin.compiled.profileScratchAlign}`);
    expect(bin.plan.argCount).toBe(4);
    expect(bin.plan.params.length).toBe(bin.compiled.ptxParams.length);
    const got = out.toFloat64Array();
    const xs = x.toFloat64Array();
    const ys = y.toFloat64Array();
    for (let i = 0; i < n; i++) if (got[i] !== Math.fround(xs[i]! + ys[i]!)) throw new Error(`element ${i}: ${got[i]} != ${xs[i]} + ${ys[i]}`);
    // A misaligned pointer where the signature promised 16-byte alignment is refused before launching.
    expect(() => k.launch(1, [x.storage.devicePtr! + 4, y, out, 15])).toThrow(/declared 16-byte aligned/);
  });

  it('specialises per launch from the arguments (bf16 pointers, fp32 scalar) and caches on disk', G, () => {
    const b = gpu();
    const source = `# unique ${process.pid}-${Date.now()}
import triton
import triton.language as tl


@triton.jit
def axpy_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    tl.store(y_ptr + offs, (alpha * x).to(y_ptr.dtype.element_ty), mask=m)
`;
    const n = 5000;
    const x = Tensor.fromArray(b, rand(n, 3, 'bf16'), [n], 'bf16');
    const y = Tensor.empty(b, [n], 'bf16');
    const spec = { source, fn: 'axpy_kernel', signature: { alpha: 'fp32' }, constexprs: { BLOCK: 512 } } as const;
    const k = tritonKernel(spec);
    k.launch(Math.ceil(n / 512), [x, y, n, 1.5]);
    expect(k.binaries([x, y, n, 1.5])[0]!.fromCache).toBe(false);
    const xs = x.toFloat64Array();
    const got = y.toFloat64Array();
    for (let i = 0; i < n; i++) expect(got[i]).toBe(roundToDType(1.5 * xs[i]!, 'bf16'));
    // A new process would find it on disk: forget what is loaded, then load again.
    clearLoadedTritonBinaries();
    const again = tritonKernel(spec);
    const t0 = performance.now();
    again.launch(Math.ceil(n / 512), [x, y, n, 2]);
    const bin = again.binaries([x, y, n, 2])[0]!;
    console.log(`     disk-cache load ${(performance.now() - t0).toFixed(1)} ms`);
    expect(bin.fromCache).toBe(true);
    const got2 = y.toFloat64Array();
    for (let i = 0; i < n; i++) expect(got2[i]).toBe(roundToDType(2 * xs[i]!, 'bf16'));
  });

  it('shows a Triton compile error at the line of the kernel source', G, () => {
    const source = `import triton
import triton.language as tl


@triton.jit
def broken(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, x * undefined_scale, mask=offs < n)
`;
    const x = Tensor.zeros(gpu(), [16], 'f32');
    let err: unknown;
    try {
      tritonKernel({ source, fn: 'broken', name: 'broken.py', constexprs: { BLOCK: 16 } }).launch(1, [x, 16]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TritonCompileError);
    const e = err as TritonCompileError;
    console.log(e.message.split('\n').map((l) => `     ${l}`).join('\n'));
    expect(e.line).toBe(9);
    expect(e.message).toMatch(/undefined_scale/);
    // The gutter pads line numbers to the widest shown (here '10'), so match the marker loosely.
    expect(e.message).toMatch(/>\s+9 \| {5}tl\.store\(x_ptr \+ offs, x \* undefined_scale, mask=offs < n\)/);
  });

  it('chooses a config per shape key by timing, and reuses it', G, () => {
    const b = gpu();
    const k = tritonKernel({
      source: ADD,
      fn: 'add_kernel',
      configs: [{ constexprs: { BLOCK_SIZE: 128 }, numWarps: 1 }, { constexprs: { BLOCK_SIZE: 1024 }, numWarps: 4 }, { constexprs: { BLOCK_SIZE: 4096 }, numWarps: 8 }],
      key: ['n_elements'],
    });
    k.noDiskCache = true;
    const n = 1 << 22;
    const x = Tensor.fromArray(b, rand(n, 4, 'f32'), [n], 'f32');
    const out = Tensor.empty(b, [n], 'f32');
    const grid = (meta: Record<string, unknown>) => Math.ceil(n / (meta.BLOCK_SIZE as number));
    k.launch(grid, [x, x, out, n]);
    const t = k.lastTuning!;
    console.log(`     tuned '${t.shapeKey}': ${t.results.map((r) => `[${r.config}] ${r.label} ${r.ms !== undefined ? `${(r.ms * 1000).toFixed(1)} us` : r.error}`).join('; ')} -> ${t.best}`);
    expect(t.results.filter((r) => r.ms !== undefined).length).toBe(3);
    k.launch(grid, [x, x, out, n]);
    expect(k.lastTuning).toBe(t); // same shape key: no second tuning
    const got = out.toFloat64Array();
    const xs = x.toFloat64Array();
    for (let i = 0; i < n; i += 997) expect(got[i]).toBe(Math.fround(2 * xs[i]!));
  });

  it('launches inside a CUDA graph capture and replays', G, () => {
    const b = gpu();
    const rt = b.runtime;
    const n = 4096;
    const x = Tensor.fromArray(b, rand(n, 5, 'f32'), [n], 'f32');
    const out = Tensor.zeros(b, [n], 'f32');
    const k = tritonKernel({ source: ADD, fn: 'add_kernel', signature: ['*fp32:16', '*fp32:16', '*fp32:16', 'i32:16'], constexprs: { BLOCK_SIZE: 1024 } });
    k.compile();
    const graph = rt.capture(() => k.launch(4, [x, x, out, n]));
    graph.replay();
    rt.synchronize();
    const got = out.toFloat64Array();
    const xs = x.toFloat64Array();
    for (let i = 0; i < n; i++) expect(got[i]).toBe(Math.fround(2 * xs[i]!));
    graph.destroy();
  });
});

describe('the triton-demo candidates (examples/candidates/triton-demo)', () => {
  const rmsRef = (x: number[], w: number[], H: number, eps: number) => {
    const out: number[] = [];
    for (let r = 0; r < x.length / H; r++) {
      let ss = 0;
      for (let j = 0; j < H; j++) ss += x[r * H + j]! ** 2;
      const inv = 1 / Math.sqrt(ss / H + eps);
      for (let j = 0; j < H; j++) out.push(x[r * H + j]! * inv * w[j]!);
    }
    return out;
  };

  for (const [T, H, dtype, residual] of [[7, 64, 'f32', false], [5, 128, 'bf16', true], [32, 4096, 'bf16', true], [64, 4096, 'bf16', false]] as const) {
    it(`RMSNorm ${dtype} [${T}, ${H}]${residual ? ' + residual' : ''}`, G, () => {
      const b = gpu();
      const eps = 1e-5;
      const m = withContext(ctxOf(dtype), () => new RMSNorm(H, eps));
      const wv = rand(H, 11, dtype, 1).map((v) => roundToDType(1 + 0.1 * v, dtype));
      m.weight.copy_(Tensor.fromArray(b, wv, [H], dtype));
      const x = Tensor.fromArray(b, rand(T * H, 12, dtype, 3), [T, H], dtype);
      const r = residual ? Tensor.fromArray(b, rand(T * H, 13, dtype, 3), [T, H], dtype) : null;
      const res = m.forward(x, r);
      const xs = Array.from(x.toFloat64Array());
      let ref = xs;
      if (r) {
        const rs = r.toFloat64Array();
        ref = xs.map((v, i) => roundToDType(v + rs[i]!, dtype));
        const sum = (res as [Tensor, Tensor])[1].toFloat64Array();
        expect(worst(sum, ref, 0, 0)).toBe(0);
      }
      const y = (r ? (res as [Tensor, Tensor])[0] : (res as Tensor)).toFloat64Array();
      const [atol, rtol] = TOL[dtype]!;
      expect(worst(y, rmsRef(ref, wv, H, eps), atol, rtol)).toBeLessThanOrEqual(1);
    });
  }

  const softmaxRef = (x: Float64Array, shape: number[], dim: number) => {
    const d = dim < 0 ? dim + shape.length : dim;
    const size = shape[d]!;
    const inner = shape.slice(d + 1).reduce((a, b) => a * b, 1);
    const outer = shape.slice(0, d).reduce((a, b) => a * b, 1);
    const out = new Float64Array(x.length);
    for (let o = 0; o < outer; o++) {
      for (let i = 0; i < inner; i++) {
        const base = o * size * inner + i;
        let mx = -Infinity;
        for (let k = 0; k < size; k++) mx = Math.max(mx, x[base + k * inner]!);
        let s = 0;
        for (let k = 0; k < size; k++) s += Math.exp(x[base + k * inner]! - mx);
        for (let k = 0; k < size; k++) out[base + k * inner] = Math.exp(x[base + k * inner]! - mx) / s;
      }
    }
    return out;
  };

  for (const [shape, dim, dtype] of [[[5, 257], -1, 'f32'], [[33, 6], 0, 'f32'], [[4, 500], -1, 'bf16'], [[2, 128256], -1, 'bf16'], [[1024, 4096], -1, 'bf16']] as const) {
    it(`Softmax ${dtype} [${shape.join(', ')}] dim ${dim}`, G, () => {
      const b = gpu();
      const m = withContext(ctxOf(dtype), () => new Softmax(dim));
      const n = shape[0] * shape[1];
      const x = Tensor.fromArray(b, rand(n, 21, dtype, 8), [...shape], dtype);
      const y = m.forward(x).toFloat64Array();
      const [atol, rtol] = TOL[dtype]!;
      expect(worst(y, softmaxRef(x.toFloat64Array(), [...shape], dim), atol, rtol)).toBeLessThanOrEqual(1);
    });
  }

  for (const [T, K, N, dtype, bias] of [[5, 64, 48, 'f32', false], [7, 96, 80, 'bf16', true], [32, 4096, 1024, 'bf16', false], [1, 4096, 1024, 'bf16', false]] as const) {
    it(`Linear ${dtype} [${T}, ${K}] x [${N}, ${K}]^T${bias ? ' + bias' : ''} (tuned)`, G, () => {
      const b = gpu();
      const m = withContext(ctxOf(dtype), () => new Linear(K, N, bias));
      const wv = rand(N * K, 31, dtype, 1 / Math.sqrt(K));
      m.weight.copy_(Tensor.fromArray(b, wv, [N, K], dtype));
      const bv = bias ? rand(N, 32, dtype, 0.5) : null;
      if (bv) m.bias!.copy_(Tensor.fromArray(b, bv, [N], dtype));
      const x = Tensor.fromArray(b, rand(T * K, 33, dtype), [T, K], dtype);
      const t0 = performance.now();
      const y = m.forward(x).toFloat64Array();
      console.log(`     first call ${(performance.now() - t0).toFixed(0)} ms (compiles and tunes on a cold cache)`);
      const xs = x.toFloat64Array();
      const ref = new Float64Array(T * N);
      for (let i = 0; i < T; i++) {
        for (let j = 0; j < N; j++) {
          let s = bv ? bv[j]! : 0;
          for (let p = 0; p < K; p++) s += xs[i * K + p]! * wv[j * K + p]!;
          ref[i * N + j] = s;
        }
      }
      const [atol, rtol] = TOL[dtype]!;
      expect(worst(y, ref, atol, rtol)).toBeLessThanOrEqual(1);
    });
  }
});
