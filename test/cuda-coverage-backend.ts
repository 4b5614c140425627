/**
 * What would stop a model from running on the CUDA backend, found on the CPU: `CudaCoverageBackend` is the CPU backend
 * with its registry kernels limited to the ops the CUDA backend registers a kernel for (`new CudaBackend().opKernels`:
 * building it touches no GPU). Every other op takes its Ops route or decomposition, as on CUDA; an op with neither is
 * a gap (recorded, then run on the CPU kernel anyway so one run lists every gap). A CUDA kernel's own `supports` is
 * asked too (a decline is a gap only where no route remains). `captureGraphs()` is a GraphRuntime for the engine that
 * records each host read or write made while a decode graph is captured: on CUDA a synchronous copy fails the capture.
 * Not covered: the CUDA Ops methods' own argument limits (head dims and the like), and numerics. A kernel check that
 * reads device addresses (16-byte alignment) sees none on CPU tensors and declines: such calls show as decompositions
 * here (bf16 fused_moe_gemm); one that needs the device itself is taken as a yes and noted.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { CudaBackend } from '@fastkernels/backend-cuda';
import { OpKernelTable, getOp, type OpCall, type OpKernel, type OpSupports, type Storage } from '@fastkernels/core';

type KernelEntry = { readonly kernel: OpKernel; readonly supports?: OpSupports };

export interface CoverageReport {
  /** op -> how the CUDA backend would run it: 'kernel', 'ops', 'decomposition' (each route seen). */
  readonly routes: Map<string, Set<string>>;
  /** op -> why CUDA could not run a call (no kernel and no route, or a decline with no route). */
  readonly gaps: Map<string, Set<string>>;
  /** where a host read / write happened inside a captured decode step (the first model-zoo frames). */
  readonly captureTransfers: Set<string>;
}

class CoverageTable extends OpKernelTable {
  constructor(
    private readonly cpu: OpKernelTable,
    private readonly cuda: OpKernelTable,
    private readonly report: CoverageReport,
  ) {
    super('cpu');
  }

  private note(map: Map<string, Set<string>>, op: string, what: string): void {
    let s = map.get(op);
    if (!s) map.set(op, (s = new Set()));
    s.add(what);
  }

  override has(op: string): boolean {
    return this.get(op) !== undefined;
  }

  override get(op: string): KernelEntry | undefined {
    const cpu = this.cpu.get(op);
    const cuda = this.cuda.get(op);
    const spec = getOp(op);
    const fallback = spec.viaOps ? 'ops' : spec.decompose ? 'decomposition' : null;
    if (!cuda) {
      if (fallback) {
        this.note(this.report.routes, op, fallback);
        return undefined;
      }
      this.note(this.report.gaps, op, 'no CUDA kernel, no Ops route, no decomposition');
      return cpu;
    }
    if (!cpu) return undefined;
    return {
      kernel: cpu.kernel,
      supports: (call: OpCall) => {
        let ok: true | string;
        try {
          ok = cuda.supports ? cuda.supports(call) : true;
        } catch (e) {
          ok = true; // a check that needs the device (properties, libraries): assume it takes the call
          this.note(this.report.routes, op, `kernel (its check needs the device, taken as yes: ${(e as Error).message.slice(0, 40)}...)`);
        }
        if (ok === true) {
          this.note(this.report.routes, op, 'kernel');
          return cpu.supports ? cpu.supports(call) : true;
        }
        if (fallback) {
          this.note(this.report.routes, op, `${fallback} (the CUDA kernel declines: ${ok})`);
          return ok;
        }
        this.note(this.report.gaps, op, `the CUDA kernel declines (${ok}) and there is no other route`);
        return cpu.supports ? cpu.supports(call) : true;
      },
    };
  }

  override names(): string[] {
    return this.cuda.names().filter((n) => this.cpu.has(n));
  }
}

export class CudaCoverageBackend extends CpuBackend {
  readonly report: CoverageReport = { routes: new Map(), gaps: new Map(), captureTransfers: new Set() };
  private capturing = false;

  constructor() {
    super();
    const cpuKernels = this.opKernels;
    // the field is readonly to users; here it is replaced once, before any call
    (this as { opKernels: OpKernelTable }).opKernels = new CoverageTable(cpuKernels, new CudaBackend().opKernels, this.report);
  }

  override write(dst: Storage, byteOffset: number, src: Uint8Array): void {
    this.noteTransfer('host write');
    super.write(dst, byteOffset, src);
  }

  override read(src: Storage, byteOffset: number, byteLength: number): Uint8Array {
    this.noteTransfer('host read');
    return super.read(src, byteOffset, byteLength);
  }

  private noteTransfer(what: string): void {
    if (!this.capturing) return;
    const frames = (new Error().stack ?? '').split('\n').slice(1).map((l) => l.trim());
    const ours = frames.filter((l) => /model-zoo\/src|core\/src\/ops/.test(l) && !/engine\/(runner|engine)\.ts/.test(l)).slice(0, 2);
    this.report.captureTransfers.add(`${what} at ${ours.map((l) => l.replace(/^at /, '').replace(/\(.*packages\//, '(')).join(' <- ') || frames[2]}`);
  }

  /** A GraphRuntime for LLMEngine's `graphs` option: capture runs the step once with transfers watched, replay reruns it. */
  captureGraphs() {
    return {
      createPool: (bytes: number) => ({ bytes }),
      capture: (fn: () => void) => {
        this.capturing = true;
        try {
          fn();
        } finally {
          this.capturing = false;
        }
        return { replay: fn, destroy: () => {} };
      },
      poolBytes: (pool: unknown) => (pool as { bytes: number }).bytes,
      destroyPool: () => {},
    };
  }
}
