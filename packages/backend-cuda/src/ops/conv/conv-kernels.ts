/**
 * The CUDA conv ops: cuDNN where it is present and takes the shape, else (or when told to) the implicit-GEMM fallback.
 *
 * - cuDNN through its backend (graph) API as PyTorch (an operation graph, heuristics' engine configs, an execution
 *   plan per shape key), the legacy API where the graph API is missing or no engine takes the shape (native/cudnn.cc).
 *
 * - Layout as PyTorch's cuDNN path: the output (and what cuDNN reads) is channels-last when the batched 2-d / 3-d input
 *   or the weight is, else contiguous; an operand in another layout is copied for cuDNN (the fallback reads any strides).
 * - f32: TF32 tensor cores allowed by default, as torch.backends.cudnn.allow_tf32 (True by default, unlike matmul's
 *   flag); `allowTf32 = false` gives exact f32 FMA math. f16 / bf16: tensor cores, f32 accumulation. The fallback always
 *   accumulates in f32 FMA.
 * - Bias: after cuDNN, an in-place add over the output (PyTorch adds it in a second kernel too); fused in the fallback.
 *   conv2d_act's activation rides in the same pass (one read + write of the output, not two passes and a new tensor)
 *   or the fallback's epilogue.
 * - `library`: 'auto' (cuDNN, else the fallback), 'cudnn' (throw if cuDNN cannot), 'fallback' (never cuDNN): the
 *   switch tests and benchmarks use to measure the fallback where cuDNN exists.
 * The hot path fills one reused geometry and one parameter block; plans are cached per shape key in the addon,
 * generated kernels per variant.
 */
import { Tensor } from '@fastkernels/core';
import type { DeviceBlock } from '../../allocator.js';
import { captureHooks, type CudaRuntime } from '../../runtime.js';
import { addr } from '../elementwise.js';
import type { GenKernelCache } from '../gen-cache.js';
import { cudnnAddon, cudnnState, loadCudnn, type CudnnState } from './cudnn-library.js';
import { CUDNN_PARAM_COUNT, cudnnPlanKey, fillCudnnParams, setCudnnPointers, type CudnnApi } from './cudnn-params.js';
import { ConvLaunches } from './fallback.js';
import type { ConvDType, ConvEpilogueAct } from './implicit-gemm-source.js';
import { ConvGeometry, convFormat, cudnnEligible, fallbackEligible, fillGeometry, fromChannelsLastOrder, isChannelsLast, isContiguous, toChannelsLastOrder, type ConvAttrsIn, type ConvFormat, type Nd } from './plan.js';

export type ConvLibrary = 'auto' | 'cudnn' | 'fallback';
/** The first workspace a stream gets (grown when an algorithm asks for more; reserved before graph captures). */
const FIRST_WORKSPACE_BYTES = 32 * 1024 * 1024;
const CONV_DTYPES = new Set(['f32', 'f16', 'bf16']);

export class ConvKernels {
  /** Which implementation runs (see the file comment). */
  library: ConvLibrary = 'auto';
  /** f32 convs through cuDNN may use TF32 tensor cores (PyTorch's default for cuDNN convs). */
  allowTf32 = true;
  /**
   * How cuDNN's engine is chosen per shape: 'heuristic' takes the first engine config of the heuristics that finalises
   * (torch's default with cudnn.benchmark off), 'benchmark' times the first few plans on the shape's first call and
   * keeps the fastest (cudnn.benchmark = True: what fixed-shape vision inference runs). A call inside a graph capture
   * always takes the heuristics' choice.
   */
  algoSearch: 'heuristic' | 'benchmark' = 'heuristic';
  /** cuDNN plan keys run with the search on outside a capture (cudnnPlanKey): a capture of one of them reuses its measured plan. */
  private readonly measuredKeys = new Set<string>();
  /** Which cuDNN API: 'auto' (graph, legacy where the graph API declines), 'graph' or 'legacy' only (A/B and tests). */
  cudnnApi: CudnnApi = 'auto';
  /** Which implementation the last call took (tests check it). */
  lastPath: 'cudnn' | 'fallback' | undefined;
  /** Calls cuDNN declined (they ran on the fallback) and the last reason it gave. */
  declined = 0;
  lastDeclineReason = '';
  private readonly geo = new ConvGeometry();
  private readonly params = new Float64Array(CUDNN_PARAM_COUNT);
  private readonly launches: ConvLaunches;
  private readonly workspaces = new Map<number, DeviceBlock>();
  private usedCudnn = false;
  private readonly temps: Tensor[] = [];

  constructor(
    private readonly runtime: () => CudaRuntime,
    cache: GenKernelCache,
    /** Where cuDNN comes from (tests pass a fake state). */
    private readonly cudnn: (rt: CudaRuntime) => CudnnState = defaultCudnn,
  ) {
    this.launches = new ConvLaunches(cache, runtime);
    // cudnnCreate and a first workspace allocate: do both before a graph capture, once convs have used cuDNN
    captureHooks.push((rt) => {
      if (!this.usedCudnn || rt !== this.runtime()) return;
      cudnnAddon(rt.addon).cudnnEnsureHandle(rt.device);
      this.workspace(rt, FIRST_WORKSPACE_BYTES);
    });
  }

  /** Whether this call can run here (dtype and the fallback's limits: cuDNN only adds to what the fallback takes). */
  supports(nd: Nd, transposed: boolean, x: Tensor, w: Tensor, outShape: readonly number[], attrs: ConvAttrsIn): true | string {
    if (!CONV_DTYPES.has(x.dtype)) return `dtype ${x.dtype}: the CUDA convs take f32, f16, bf16`;
    if (this.library === 'cudnn') {
      const s = this.cudnn(this.runtime());
      if (!s.ok) return s.reason;
    }
    return fallbackEligible(fillGeometry(this.geo, nd, transposed, x.shape, w.shape, outShape, attrs));
  }

  /** The conv (act 'none') or conv2d_act: act(conv(x, w) + bias). */
  run(nd: Nd, transposed: boolean, x: Tensor, w: Tensor, bias: Tensor | null, outShape: readonly number[], attrs: ConvAttrsIn, act: ConvEpilogueAct = 'none'): Tensor {
    const g = fillGeometry(this.geo, nd, transposed, x.shape, w.shape, outShape, attrs);
    const dtype = x.dtype as ConvDType;
    const format = convFormat(nd, g.batched, x, w);
    const y = allocOutput(x, outShape, format);
    if (y.numel === 0) return y;
    const temps = this.temps; // reused: run is not re-entered (no callbacks below call back into convs)
    temps.length = 0;
    try {
      const b = bias && (bias.isContiguous() ? bias : keep(temps, bias.contiguous()));
      if (this.library !== 'fallback' && this.tryCudnn(g, dtype, format, x, w, b, y, temps, act)) {
        this.lastPath = 'cudnn';
        return y;
      }
      this.launches.igemm(g, dtype, x, w, b, y, act);
      this.lastPath = 'fallback';
      return y;
    } catch (e) {
      y.dispose();
      throw e;
    } finally {
      for (const t of temps) t.dispose();
      temps.length = 0;
    }
  }

  /** Run on cuDNN; false when it is absent or declines (then the fallback runs), unless library is 'cudnn'. */
  private tryCudnn(g: ConvGeometry, dtype: ConvDType, format: ConvFormat, x: Tensor, w: Tensor, bias: Tensor | null, y: Tensor, temps: Tensor[], act: ConvEpilogueAct): boolean {
    const rt = this.runtime();
    const s = this.cudnn(rt);
    const why = s.ok ? cudnnEligible(g, x.numel, w.numel, y.numel) : s.reason;
    if (why !== true) return this.decline(why);
    const xs = inFormat(x, format, temps);
    const ws = inFormat(w, format, temps);
    const api = cudnnAddon(rt.addon);
    this.usedCudnn = true;
    let block = this.workspace(rt, 0);
    const tensorOps = dtype !== 'f32' || this.allowTf32;
    const search = this.algoSearch === 'benchmark';
    const p = fillCudnnParams(this.params, g, format, dtype, tensorOps, rt.device, xs, y, search, this.cudnnApi);
    setCudnnPointers(p, addr(xs), addr(ws), addr(y), block?.ptr ?? 0, block?.requested ?? 0, rt.stream);
    if (search) {
      // a capture replays the plan measured eagerly under the same key (the vision runner's warm-up), and never times
      const key = cudnnPlanKey(p);
      if (!rt.capturing) this.measuredKeys.add(key);
      else if (!this.measuredKeys.has(key)) p[42] = 0;
    }
    let r = api.cudnnConv(p);
    // a workspace answer (nothing ran): grow it and call again; a plan refused at launch can give way to one that
    // wants more (the next engine config, the legacy API, a benchmark search), hence a few rounds
    for (let round = 0; r > 0 && round < 4; round++) {
      block = this.workspace(rt, r);
      p[47] = block!.ptr;
      p[48] = block!.requested;
      r = api.cudnnConv(p);
    }
    if (r > 0) return this.decline(`cuDNN still asks for ${r} bytes of workspace after 4 rounds`);
    if (r < 0) return this.decline(api.cudnnDeclineReason());
    if (bias || act !== 'none') this.launches.biasAdd(g, dtype, format, bias, y, act);
    return true;
  }

  private decline(reason: string): false {
    if (this.library === 'cudnn') throw new Error(`conv: cuDNN cannot run this call (library is 'cudnn'): ${reason}`);
    this.declined++;
    this.lastDeclineReason = reason;
    return false;
  }

  /** The current stream's workspace, grown to at least `bytes` (undefined when none is needed yet). */
  private workspace(rt: CudaRuntime, bytes: number): DeviceBlock | undefined {
    let b = this.workspaces.get(rt.stream);
    if (bytes === 0 || (b && b.requested >= bytes)) return b;
    if (b) rt.free(b); // stream-ordered: work already queued with it finishes before the block is reused
    b = rt.allocate(Math.max(bytes, FIRST_WORKSPACE_BYTES));
    this.workspaces.set(rt.stream, b);
    return b;
  }
}

/** cuDNN from the addon; NVRTC and cuBLASLt first (best effort), whose sonames cuDNN's engine libraries link against. */
function defaultCudnn(rt: CudaRuntime): CudnnState {
  const known = cudnnState();
  if (known) return known;
  for (const lib of ['nvrtc', 'cublasLt'] as const) {
    try {
      rt.ensureLibrary(lib);
    } catch {
      /* cuDNN then loads without the engines that need it */
    }
  }
  return loadCudnn(cudnnAddon(rt.addon));
}

function keep(temps: Tensor[], t: Tensor): Tensor {
  temps.push(t);
  return t;
}

/** The output in `format`: contiguous, or allocated [N, *sp, C] and viewed as [N, C, *sp]. */
function allocOutput(x: Tensor, shape: readonly number[], format: ConvFormat): Tensor {
  if (format === 'contiguous') return Tensor.empty(x.backend, shape, x.dtype, { device: x.device });
  const order = toChannelsLastOrder(shape.length);
  const base = Tensor.empty(x.backend, order.map((d) => shape[d]!), x.dtype, { device: x.device });
  const y = base.permute(fromChannelsLastOrder(shape.length));
  base.dispose();
  return y;
}

/** t itself when already packed in `format`, else a packed copy (kept in temps). */
function inFormat(t: Tensor, format: ConvFormat, temps: Tensor[]): Tensor {
  if (format === 'contiguous') return isContiguous(t.shape, t.strides) ? t : keep(temps, t.contiguous());
  if (isChannelsLast(t.shape, t.strides)) return t;
  const p = t.permute(toChannelsLastOrder(t.rank));
  const c = p.contiguous();
  p.dispose();
  const v = c.permute(fromChannelsLastOrder(t.rank));
  c.dispose();
  return keep(temps, v);
}
