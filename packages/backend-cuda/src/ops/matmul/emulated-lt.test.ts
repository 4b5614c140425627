/**
 * The matmul kernels' cuBLASLt calls checked for their numbers without a GPU: the fake device gets a host memory
 * (addresses -> float64 values), the parameter block the addon would receive (blaslt.ts fillLtParams) is executed the
 * way cuBLASLt defines it (column-major D = epilogue(alpha op(A) op(B) + beta C + bias), transposes, leading dims,
 * batch strides, C apart from D), copies and fills run on that memory, and the results are compared with the float64
 * CPU backend. This pins the row-major -> column-major mapping, the layouts read in place and the epilogues; the GPU
 * test (cublaslt-matmul.gpu.test.ts) then only has cuBLASLt itself left to check.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor, callOp1, geluTanh, type OpArg } from '@fastkernels/core';
import { describe, expect, it, vi } from 'vitest';
import { fake } from '../../../test/ops-fake.js';
import { LT_PARAM_COUNT, fillLtParams, type GemmDesc } from '../../blaslt.js';
import { registerGeneratedKernels } from '../register.js';
import { GeneratedCopy } from './copy.js';

/** Host memory of the fake device: one float64 value per element address. */
let mem = new Map<number, number>();
const addr = (t: Tensor, i: number) => t.storage.devicePtr! + i * t.itemsize;

/** Every element of `t` (any strides) in row-major order of its shape, as the flat offsets (in elements) of its storage. */
function offsets(t: Tensor): number[] {
  const out: number[] = [];
  const idx = new Array<number>(t.rank).fill(0);
  for (let n = 0; n < t.numel; n++) {
    let o = t.offset;
    for (let d = 0; d < t.rank; d++) o += idx[d]! * t.strides[d]!;
    out.push(o);
    for (let d = t.rank - 1; d >= 0; d--) {
      if (++idx[d]! < t.shape[d]!) break;
      idx[d] = 0;
    }
  }
  return out;
}

function hostCopy(dst: Tensor, src: Tensor): void {
  const [od, os] = [offsets(dst), offsets(src)];
  od.forEach((o, i) => mem.set(addr(dst, o), mem.get(addr(src, os[i]!))!));
}

/** cuBLASLt's contract on the parameter block (layout: native/addon.cc LtMatmul). */
function runLt(p: Float64Array, itemsize: number): void {
  const [ta, tb, m, n, k] = [p[0], p[1], p[2]!, p[3]!, p[4]!];
  const [lda, ldb, ldc, ldd] = [p[10]!, p[11]!, p[12]!, p[13]!];
  const [sA, sB, sC, sD, batch, epi] = [p[14]!, p[15]!, p[16]!, p[17]!, p[18]!, p[19]!];
  const [A, B, C, D, bias, alpha, beta] = [p[25]!, p[26]!, p[27]!, p[28]!, p[29]!, p[30]!, p[31]!];
  const at = (base: number, i: number) => mem.get(base + i * itemsize) ?? NaN;
  for (let bt = 0; bt < batch; bt++) {
    for (let j = 0; j < n; j++) {
      for (let i = 0; i < m; i++) {
        let s = 0;
        for (let l = 0; l < k; l++) {
          const a = ta ? at(A, bt * sA + l + i * lda) : at(A, bt * sA + i + l * lda);
          const b = tb ? at(B, bt * sB + j + l * ldb) : at(B, bt * sB + l + j * ldb);
          s += a * b;
        }
        let v = alpha * s + (beta !== 0 ? beta * at(C, bt * sC + i + j * ldc) : 0);
        if (epi & 4) v += at(bias, i);
        if (epi & 2) v = Math.max(v, 0);
        if (epi & 32) v = geluTanh(v); // cuBLASLt's GELU is the tanh form
        mem.set(D + (bt * sD + i + j * ldd) * itemsize, v);
      }
    }
  }
}

const cpu = new CpuBackend();
let seed = 1;
function rand(shape: number[]): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return Tensor.fromArray(cpu, new Rng(seed++).fillNormal(n, 1), shape, 'f32');
}

function device() {
  const f = fake();
  mem = new Map();
  const ops = f.backend.ops as unknown as Record<string, unknown>;
  const p = new Float64Array(LT_PARAM_COUNT);
  ops.gemm = (g: GemmDesc) => runLt(fillLtParams(p, g, 0, 0, 0), 4);
  ops.fill = (t: Tensor, v: number) => offsets(t).forEach((o) => mem.set(addr(t, o), v));
  ops.copy = hostCopy;
  registerGeneratedKernels(f.backend.opKernels!, f.runtime, f.cache);
  /** A fake-device copy of a CPU tensor (contiguous). */
  const up = (c: Tensor) => {
    const t = f.t([...c.shape], 'f32');
    c.toFloat64Array().forEach((v, i) => mem.set(addr(t, i), v));
    return t;
  };
  const down = (t: Tensor) => Float64Array.from(offsets(t), (o) => mem.get(addr(t, o))!);
  return { up, down };
}
vi.spyOn(GeneratedCopy.prototype, 'copy').mockImplementation(hostCopy);

type View = ((t: Tensor) => Tensor) | undefined;
/** op on the CPU backend and on the emulated device over the same values and views; max |difference|. */
function check(op: string, shapes: (number[] | null)[], attrs: object = {}, views: View[] = []): void {
  const d = device();
  const host = shapes.map((s) => (s ? rand(s) : null));
  const dev = host.map((h) => (h ? d.up(h) : null));
  const v = (xs: (Tensor | null)[]) => xs.map((x, i) => (x && views[i] ? views[i]!(x) : x)) as OpArg[];
  const want = callOp1(op, v(host), attrs).toFloat64Array();
  const got = d.down(callOp1(op, v(dev), attrs));
  expect(got.length).toBe(want.length);
  let worst = 0;
  want.forEach((w, i) => (worst = Math.max(worst, Math.abs(got[i]! - w) / (1e-5 + 1e-5 * Math.abs(w)))));
  expect(worst, `${op} ${JSON.stringify(shapes)} ${JSON.stringify(attrs)}`).toBeLessThan(4);
}

const T = (t: Tensor) => t.transpose(-1, -2);
const heads = (t: Tensor) => t.transpose(0, 1);

describe('the cuBLASLt calls, executed on the host, agree with the float64 CPU backend', () => {
  it('bmm / matmul: layouts read in place, transposes, broadcast and folded batches, copies', () => {
    check('bmm', [[3, 5, 7], [3, 7, 4]]);
    check('bmm', [[3, 5, 7], [3, 4, 7]], {}, [undefined, T]);
    check('bmm', [[3, 7, 5], [3, 4, 7]], {}, [T, T]);
    check('bmm', [[6, 3, 16], [3, 16, 5]], {}, [heads, undefined]); // MLA: [T, H, D] read as [H, T, D]
    check('bmm', [[1, 5, 7], [4, 7, 3]], {}, [(t) => t.expand([4, 5, 7]), undefined]);
    check('bmm', [[3, 5, 10], [3, 7, 4]], {}, [(t) => t.narrow(2, 2, 7), undefined]);
    check('matmul', [[2, 3, 5, 7], [7, 4]]);
    check('matmul', [[2, 3, 5, 7], [4, 7]], {}, [undefined, T]);
    check('matmul', [[2, 3, 5, 7], [3, 7, 4]]);
    check('matmul', [[2, 1, 5, 7], [1, 3, 7, 4]]);
    check('matmul', [[4, 1, 7], [7, 6]]);
    check('matmul', [[7], [2, 7, 3]]);
    check('matmul', [[5, 14], [7, 3]], {}, [(t) => t.slice(1, 0, 14, 2), undefined]);
  });

  it('baddbmm: C apart from D (batch stride 0 too), the bias-epilogue row, a copied input, beta 0', () => {
    check('baddbmm', [[3, 5, 4], [3, 5, 7], [3, 7, 4]], { beta: 0.5, alpha: 2 });
    check('baddbmm', [[1, 5, 4], [3, 5, 7], [3, 7, 4]], { beta: 1.5 });
    check('baddbmm', [[4], [3, 5, 7], [3, 7, 4]], { alpha: -0.5 });
    check('baddbmm', [[3, 1, 4], [3, 5, 7], [3, 7, 4]], { beta: 1 });
    check('baddbmm', [[5, 1], [3, 5, 7], [3, 7, 4]], { beta: 0.25 });
    check('baddbmm', [[3, 4, 5], [3, 5, 7], [3, 7, 4]], { beta: 0.5 }, [T, undefined, undefined]);
    check('baddbmm', [[3, 5, 4], [3, 5, 7], [3, 7, 4]], { beta: 0, alpha: 0.5 });
  });

  it('linear: RELU / GELU(tanh) epilogues with and without bias, 1-D and strided inputs', () => {
    for (const activation of ['relu', 'gelu_tanh'] as const) {
      check('linear', [[2, 3, 8], [5, 8], [5]], { activation });
      check('linear', [[2, 3, 8], [5, 8], null], { activation });
      check('linear', [[8], [5, 8], [5]], { activation });
      check('linear', [[4, 12], [5, 8], [5]], { activation }, [(t) => t.narrow(1, 2, 8)]);
    }
  });

  it('einsum: the single-GEMM family patterns, with the output written in place or copied', () => {
    check('einsum', [[4, 3, 8], [3, 8, 5]], { equation: 'bhd,hdk->bhk' });
    check('einsum', [[4, 3, 5], [3, 8, 5]], { equation: 'bhk,hdk->bhd' });
    check('einsum', [[2, 3, 4, 6], [2, 3, 5, 6]], { equation: 'bhqd,bhkd->bhqk' });
    check('einsum', [[2, 4, 5, 3], [2, 6, 5, 3]], { equation: 'bikc,bjkc->bijc' });
    check('einsum', [[2, 5, 4, 3], [2, 5, 6, 3]], { equation: 'bkic,bkjc->bijc' });
    check('einsum', [[2, 1, 4, 5], [3, 5, 6]], { equation: '...ij,...jk->...ik' });
    check('einsum', [[3, 4], [4, 5], [5, 2]], { equation: 'ij,jk,kl->il' });
    check('einsum', [[7, 6], [7, 6]], { equation: 'ij,ij->i' });
    check('einsum', [[5], [7]], { equation: 'i,j->ij' });
    check('einsum', [[9], [9]], { equation: 'i,i->' });
    check('einsum', [[4, 4, 3], [3, 5]], { equation: 'iij,jk->ik' });
  });
});
