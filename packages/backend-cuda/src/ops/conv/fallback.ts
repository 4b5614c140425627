/**
 * Launches of the generated conv kernels (implicit-gemm-source.ts): the implicit-GEMM fallback conv, and the in-place
 * bias add / activation (conv2d_act) after a cuDNN conv. Kernels are cached by a small number per variant; the argument array, the grid and the
 * stride scratch are reused, so a launch allocates nothing but what the runtime's packing does.
 */
import type { Tensor } from '@fastkernels/core';
import type { CudaKernel } from '../../kernel.js';
import type { CudaRuntime } from '../../runtime.js';
import { addr } from '../elementwise.js';
import type { GenKernelCache } from '../gen-cache.js';
import { biasAddSource, CONV_ACTS, IGEMM_SIGNATURE, IGEMM_TILE, igemmSource, type ConvDType, type ConvEpilogueAct } from './implicit-gemm-source.js';
import { strides5, type ConvFormat, type ConvGeometry } from './plan.js';

const DT: Readonly<Record<ConvDType, number>> = { f32: 0, f16: 1, bf16: 2 };
/** Kernel numbers: igemm variants below 64 (36 of them), the epilogue's from 64. */
const EPILOGUE_KEYS = 64;

export class ConvLaunches {
  private readonly kernels = new Map<number, CudaKernel>();
  private readonly args: number[] = new Array<number>(IGEMM_SIGNATURE.length).fill(0);
  private readonly grid: [number, number, number] = [1, 1, 1];
  private readonly s = new Float64Array(15);
  private readonly biasArgs: number[] = [0, 0, 0, 0, 0];

  constructor(
    private readonly cache: GenKernelCache,
    private readonly runtime: () => CudaRuntime,
  ) {}

  private kernel(key: number, make: () => CudaKernel): CudaKernel {
    let k = this.kernels.get(key);
    if (!k) this.kernels.set(key, (k = make()));
    return k;
  }

  /** y = act(conv(x, w) (+ bias)) by the implicit-GEMM kernel; x, w, y with any strides, y already allocated. */
  igemm(g: ConvGeometry, dtype: ConvDType, x: Tensor, w: Tensor, bias: Tensor | null, y: Tensor, act: ConvEpilogueAct = 'none'): void {
    const key = (DT[dtype] * 4 + (g.transposed ? 2 : 0) + (bias ? 1 : 0)) * CONV_ACTS.length + CONV_ACTS.indexOf(act);
    const k = this.kernel(key, () => this.cache.kernel(`conv-igemm|${key}`, () => igemmSource({ dtype, transposed: g.transposed, bias: bias !== null, act }), 'conv-igemm-generated'));
    const s = this.s;
    strides5(s, 0, g.nd, g.batched, x.shape, x.strides);
    strides5(s, 5, g.nd, true, w.shape, w.strides);
    strides5(s, 10, g.nd, g.batched, y.shape, y.strides);
    const a = this.args;
    a[0] = addr(y);
    a[1] = addr(x);
    a[2] = addr(w);
    a[3] = bias ? addr(bias) : 0;
    a[4] = g.N;
    a[5] = g.C;
    a[6] = g.in[0]!;
    a[7] = g.in[1]!;
    a[8] = g.in[2]!;
    a[9] = g.K;
    a[10] = g.out[0]!;
    a[11] = g.out[1]!;
    a[12] = g.out[2]!;
    a[13] = g.k[0]!;
    a[14] = g.k[1]!;
    a[15] = g.k[2]!;
    a[16] = g.G;
    for (let i = 0; i < 3; i++) {
      a[17 + i] = g.stride[i]!;
      a[20 + i] = g.pad[i]!;
      a[23 + i] = g.dil[i]!;
    }
    // x (n c d h w); weight roles: out-channel, in-channel (forward [K, C/G]: dims 0, 1; transposed [C, K/G]: 1, 0); y
    for (let i = 0; i < 5; i++) a[26 + i] = s[i]!;
    a[31] = g.transposed ? s[6]! : s[5]!;
    a[32] = g.transposed ? s[5]! : s[6]!;
    for (let i = 2; i < 5; i++) a[31 + i] = s[5 + i]!;
    for (let i = 0; i < 5; i++) a[36 + i] = s[10 + i]!;
    this.grid[0] = Math.ceil(g.pixels / IGEMM_TILE.BM);
    this.grid[1] = Math.ceil(g.K / g.G / IGEMM_TILE.BN);
    this.grid[2] = g.G;
    k.launch(this.grid, IGEMM_TILE.threads, 0, a);
  }

  /** y = act(y + bias[channel]) in place (bias or act may be absent); y contiguous in `format` (channels innermost for channels-last). */
  biasAdd(g: ConvGeometry, dtype: ConvDType, format: ConvFormat, bias: Tensor | null, y: Tensor, act: ConvEpilogueAct = 'none'): void {
    const n = y.numel;
    const full = dtype === 'f32' ? 4 : 8;
    const vec = n % full === 0 && addr(y) % 16 === 0 ? full : 1;
    const key = EPILOGUE_KEYS + ((DT[dtype] * 2 + (vec > 1 ? 1 : 0)) * CONV_ACTS.length + CONV_ACTS.indexOf(act)) * 2 + (bias ? 1 : 0);
    const suffix = `${act === 'none' ? '' : `|${act}`}${bias ? '' : '|nobias'}`; // the conv ops' own names unchanged
    const k = this.kernel(key, () => this.cache.kernel(`conv-bias|${dtype}|${vec}${suffix}`, () => biasAddSource(dtype, vec, act, bias !== null), 'conv-bias-generated'));
    const a = this.biasArgs;
    a[0] = addr(y);
    a[1] = bias ? addr(bias) : 0;
    a[2] = n;
    a[3] = g.K;
    a[4] = format === 'channels_last' ? 1 : g.out[0]! * g.out[1]! * g.out[2]!;
    const sms = this.runtime().properties().multiprocessors;
    k.launch(Math.max(1, Math.min(Math.ceil(n / vec / 256), sms * 8)), 256, 0, a);
  }
}
