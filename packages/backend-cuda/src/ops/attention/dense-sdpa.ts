/**
 * scaled_dot_product_attention on CUDA. Calls the flash prefill kernel takes (sdpaViaPrefillDecline: bf16 / f16, head
 * dim 64 or 128, no mask) run on the FA3 kernel in place where it takes them (dense-sdpa-fa3.ts: sm_90a, q / k / v read
 * through tensor maps over their [heads, rows, D] storage, the output's [heads, L, D] written through its strides, no
 * copy), else one varlen call per batch entry over strided [L, heads, D] views of q / k / v (the wgmma / mma.sync
 * kernels), its [L, heads, D] result copied into the output's [heads, L, D]; the rest run on the
 * dense tensor-core kernel (kernels/attention_dense.cu): the registry call's tensors read in place through (batch,
 * head, row, column) strides where their layout allows, a dense copy otherwise (a non-contiguous head dim, rows not
 * 16-byte aligned, batch dims that do not collapse, a float64 mask); one kernel per (dtype, head dims, tile plan, mask
 * kind), cached by a numeric key so a repeated call formats no string.
 */
import { F, Tensor, type OpCall, type SdpaAttrs } from '@fastkernels/core';
import type { ArgType, ArgValue } from '../../args.js';
import type { CudaKernel } from '../../kernel.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import type { GenKernelCache } from '../gen-cache.js';
import type { SpineContext } from '../launch/context.js';
import { runSdpaOnFa3 } from './dense-sdpa-fa3.js';
import { chunkAligned, operandStrides, type OperandStrides } from './layout.js';
import { denseSdpaDecline, planDenseSdpa, sdpaViaPrefillDecline, type DenseSdpaPlan, type DenseSdpaShape } from './plan.js';

const FILE = 'attention_dense.cu';
const ENTRY = 'fk_sdpa_dense';
export type DenseSdpaAttrs = Required<Omit<SdpaAttrs, 'scale'>> & { scale: number | null };

// out, q, k, v (pointer + 3 strides each), mask (pointer + 4 strides), L, S, group, causal, scale_log2
const SIGNATURE: readonly ArgType[] = [
  'ptr', 'i64', 'i64', 'i64',
  'ptr', 'i64', 'i64', 'i64',
  'ptr', 'i64', 'i64', 'i64',
  'ptr', 'i64', 'i64', 'i64',
  'ptr', 'i64', 'i64', 'i64', 'i64',
  'i32', 'i32', 'i32', 'i32', 'f32',
];

const CTYPE: Readonly<Record<string, string>> = { bf16: '__nv_bfloat16', f16: '__half', f32: 'float' };
/** Mask kinds of the kernel (FK_MASK) and the additive mask dtypes it reads directly (others are converted to f32). */
const MASK_DTYPES = ['f32', 'f16', 'bf16'] as const;

/** The shape the kernel sees: batch = the leading dims before the heads, collapsed. */
export function sdpaShape(call: OpCall<DenseSdpaAttrs>): DenseSdpaShape & { outer: number[] } {
  const [q, k, v] = call.inputs as [Tensor, Tensor, Tensor];
  const o = call.outputs[0]!.shape;
  const lead = o.slice(0, -2);
  const outer = lead.slice(0, -1);
  return {
    outer,
    batch: outer.reduce((a, d) => a * d, 1),
    heads: lead.length > 0 ? lead[lead.length - 1]! : 1,
    L: q.shape[q.rank - 2]!,
    S: k.shape[k.rank - 2]!,
    D: q.shape[q.rank - 1]!,
    Dv: v.shape[v.rank - 1]!,
  };
}

export class DenseSdpa {
  private readonly kernels = new Map<number, CudaKernel>();
  /** Reused for every launch (the kernel packs them at once). */
  private readonly args: ArgValue[] = new Array<ArgValue>(SIGNATURE.length).fill(0);
  /** Send the calls the flash prefill kernel takes there (false: every call on the dense kernel; tests, A/B runs). */
  viaPrefill = true;
  /**
   * The kernel the last call ran on (tests, the ops bench): 'fa3' the FA3 kernel in place, 'prefill' the varlen prefill
   * op per batch entry and a copy, 'dense' attention_dense.cu.
   */
  lastPath: 'fa3' | 'prefill' | 'dense' | null = null;
  /** Why the last call that took the prefill route did not run on the FA3 kernel in place (null: it did). */
  lastFa3Decline: string | null = null;

  constructor(private readonly cache: GenKernelCache) {}

  /** Why this call does not take the flash prefill kernel, or null when it does. */
  prefillDecline(call: OpCall<DenseSdpaAttrs>): string | null {
    if (!this.viaPrefill) return 'viaPrefill is off';
    const [q, k, v, mask] = call.inputs as [Tensor, Tensor, Tensor, Tensor | null | undefined];
    const shape = sdpaShape(call);
    const lead = (t: Tensor) => t.shape.slice(0, -3);
    const sameBatch = [q, k, v].every((t) => t.rank >= 3 && lead(t).length === shape.outer.length && lead(t).every((d, i) => d === shape.outer[i]));
    const kHeads = k.rank >= 3 ? k.shape[k.rank - 3]! : 1;
    return sdpaViaPrefillDecline({
      dtype: q.dtype, D: shape.D, Dv: shape.Dv, L: shape.L, S: shape.S, causal: call.attrs.is_causal, masked: !!mask, dropout: call.attrs.dropout_p,
      sameBatch: sameBatch && k.dtype === q.dtype && v.dtype === q.dtype, gqa: kHeads > 0 && shape.heads % kHeads === 0,
    });
  }

  /** true, or why the kernel declines (the registry then runs the decomposition). */
  readonly supports = (call: OpCall<DenseSdpaAttrs>): true | string => {
    const [q, k, v] = call.inputs as [Tensor, Tensor, Tensor];
    const why = denseSdpaDecline({ ...sdpaShape(call), dtype: q.dtype, kDtype: k.dtype, vDtype: v.dtype, dropout: call.attrs.dropout_p });
    return why ?? true;
  };

  readonly run = (call: OpCall<DenseSdpaAttrs>): Tensor => {
    const [qIn, kIn, vIn, maskIn] = call.inputs as [Tensor, Tensor, Tensor, Tensor | null | undefined];
    const meta = call.outputs[0]!;
    const out = Tensor.empty(call.backend, meta.shape, meta.dtype, { device: qIn.device });
    const shape = sdpaShape(call);
    const { outer, heads: H, L, S, D, Dv } = shape;
    if (out.numel === 0) return out;
    if (this.prefillDecline(call) === null) {
      try {
        const kHeads = kIn.shape[kIn.rank - 3]!;
        const fa3 = runSdpaOnFa3(spineContext(call), {
          q: qIn, k: kIn, v: vIn, out, outer, heads: H, kvHeads: kHeads, L, S, D, causal: call.attrs.is_causal, scale: call.attrs.scale ?? 1 / Math.sqrt(D),
        });
        this.lastFa3Decline = fa3;
        if (fa3 === null) {
          this.lastPath = 'fa3';
          return out;
        }
        this.runViaPrefill(call, out);
      } catch (e) {
        out.dispose();
        throw e;
      }
      this.lastPath = 'prefill';
      return out;
    }
    this.lastPath = 'dense';
    const temps: Tensor[] = [];
    try {
      const kHeads = kIn.rank >= 3 ? kIn.shape[kIn.rank - 3]! : 1;
      const [q, qs] = this.operand(qIn, outer, H, L, D, temps);
      const [k, ks] = this.operand(kIn, outer, kHeads, S, D, temps);
      const [v, vs] = this.operand(vIn, outer, kHeads, S, Dv, temps);
      let maskKind = 0;
      let maskType = 0;
      let m: Tensor | null = null;
      let ms: OperandStrides = { batch: 0, head: 0, row: 0, col: 0 };
      if (maskIn) {
        m = maskIn;
        if (m.dtype === 'bool') maskKind = 1;
        else {
          maskKind = 2;
          maskType = (MASK_DTYPES as readonly string[]).indexOf(m.dtype);
          if (maskType < 0) {
            m = keep(temps, m.to('f32'));
            maskType = 0;
          }
        }
        let s = operandStrides(m.shape, m.strides, outer, H, L, S);
        if (!s) {
          m = dense(m, [...outer, H, L, S], temps);
          s = operandStrides(m.shape, m.strides, outer, H, L, S)!;
        }
        ms = s;
      }
      const plan = planDenseSdpa(shape);
      const kernel = this.kernel(q.dtype, D, Dv, plan, maskKind, maskType);
      const scale = call.attrs.scale ?? 1 / Math.sqrt(D);
      const a = this.args;
      let i = 0;
      a[i++] = out; a[i++] = H * L * Dv; a[i++] = L * Dv; a[i++] = Dv;
      a[i++] = q; a[i++] = qs.batch; a[i++] = qs.head; a[i++] = qs.row;
      a[i++] = k; a[i++] = ks.batch; a[i++] = ks.head; a[i++] = ks.row;
      a[i++] = v; a[i++] = vs.batch; a[i++] = vs.head; a[i++] = vs.row;
      a[i++] = m ?? 0; a[i++] = ms.batch; a[i++] = ms.head; a[i++] = ms.row; a[i++] = ms.col;
      a[i++] = L; a[i++] = S; a[i++] = H / kHeads; a[i++] = call.attrs.is_causal ? 1 : 0; a[i++] = scale * Math.LOG2E;
      kernel.launch(plan.grid, plan.block, plan.sharedBytes, a);
    } finally {
      for (const t of temps) t.dispose();
    }
    return out;
  };

  /**
   * The call on the flash prefill kernel: per batch entry b, q[b] / k[b] / v[b] as strided [rows, heads, D] views (the
   * kernel reads any row and head strides; it copies what is not 16-byte aligned), one sequence (cu_seqlens [0, L] and
   * [0, S], written by two fills: nothing is uploaded, so a graph capture may hold the call), the kernel's contiguous
   * [L, H, D] result copied into out[b] as [L, H, D] (out is [..., H, L, D]).
   */
  private runViaPrefill(call: OpCall<DenseSdpaAttrs>, out: Tensor): void {
    const [qIn, kIn, vIn] = call.inputs as [Tensor, Tensor, Tensor];
    const { batch: B, heads: H, L, S, D } = sdpaShape(call);
    const kHeads = kIn.shape[kIn.rank - 3]!;
    const temps: Tensor[] = [];
    const t = (x: Tensor) => (temps.push(x), x);
    try {
      const as4 = (x: Tensor, heads: number, rows: number) => t(x.reshape([B, heads, rows, D]));
      const [q4, k4, v4, o4] = [as4(qIn, H, L), as4(kIn, kHeads, S), as4(vIn, kHeads, S), as4(out, H, L)];
      const cu = (n: number) => {
        const c = t(Tensor.empty(call.backend, [2], 'i32', { device: qIn.device }));
        c.fill_(0);
        t(c.narrow(0, 1, 1)).fill_(n);
        return c;
      };
      const [cuQ, cuK] = [cu(L), cu(S)];
      const scale = call.attrs.scale ?? 1 / Math.sqrt(D);
      // [heads, rows, D] of entry b as [rows, heads, D]
      const rowsMajor = (x: Tensor, b: number) => t(t(x.select(0, b)).transpose(0, 1));
      for (let b = 0; b < B; b++) {
        const o = t(F.varlenPrefillAttention(rowsMajor(q4, b), rowsMajor(k4, b), rowsMajor(v4, b), cuQ, cuK, { scale, causal: call.attrs.is_causal }));
        rowsMajor(o4, b).copy_(o);
      }
    } finally {
      for (const x of temps.reverse()) x.dispose();
    }
  }

  /** t as the kernel reads it: its strides over [...outer, heads, rows, cols], a dense copy where they do not serve. */
  private operand(t: Tensor, outer: readonly number[], heads: number, rows: number, cols: number, temps: Tensor[]): [Tensor, OperandStrides] {
    const lastOk = t.shape[t.rank - 1]! <= 1 || t.strides[t.rank - 1] === 1;
    let s = lastOk ? operandStrides(t.shape, t.strides, outer, heads, rows, cols) : null;
    if (s && chunkAligned(addressOf(t), s, t.itemsize)) return [t, s];
    // a dense copy of its own shape where that collapses, else of the full broadcast shape
    let c = keep(temps, t.clone());
    s = operandStrides(c.shape, c.strides, outer, heads, rows, cols);
    if (!s) {
      c = dense(t, [...outer, heads, rows, cols], temps);
      s = operandStrides(c.shape, c.strides, outer, heads, rows, cols)!;
    }
    return [c, s];
  }

  private kernel(dtype: string, D: number, Dv: number, plan: DenseSdpaPlan, maskKind: number, maskType: number): CudaKernel {
    const key = ((((((dtype === 'f16' ? 1 : 0) * 64 + D / 8) * 64 + Dv / 8) * 8 + plan.warps) * 2 + (plan.qInRegisters ? 1 : 0)) * 3 + maskKind) * 4 + maskType;
    let k = this.kernels.get(key);
    if (!k) {
      const defines = denseSdpaDefines(dtype, D, Dv, plan, maskKind, MASK_DTYPES[maskType]!);
      k = this.cache.kernel(`sdpa_dense ${JSON.stringify(defines)}`, () => denseSdpaSource(defines), 'attention_dense');
      this.kernels.set(key, k);
    }
    return k;
  }
}

/** The kernel's specialisation: maskKind 0 none, 1 bool, 2 additive of maskDType. */
export function denseSdpaDefines(dtype: string, D: number, Dv: number, plan: DenseSdpaPlan, maskKind: number, maskDType: string): Record<string, string | number> {
  return {
    FK_T: CTYPE[dtype]!, FK_D: D, FK_DV: Dv, FK_WARPS: plan.warps, FK_BN: plan.keysPerTile, FK_QREG: plan.qInRegisters ? 1 : 0,
    FK_MASK: maskKind, FK_MT: CTYPE[maskDType]!,
  };
}

/** The kernel file with its specialisation prepended as #defines (the cubin cache keys on the whole source). */
export function denseSdpaSource(defines: Readonly<Record<string, string | number>>): { source: string; entry: string; signature: readonly ArgType[] } {
  const source = KERNEL_SOURCES[FILE];
  if (source === undefined) throw new Error(`kernel source ${FILE} is not embedded (run npm run embed-kernels -w @fastkernels/backend-cuda)`);
  const head = Object.entries(defines).map(([k, v]) => `#define ${k} ${v}`).join('\n');
  return { source: `${head}\n${source}`, entry: ENTRY, signature: SIGNATURE };
}

/** The CUDA spine context of the call's backend (absent on other backends: the CPU tests of the host side). */
function spineContext(call: OpCall<DenseSdpaAttrs>): SpineContext | undefined {
  return (call.backend.ops as { spine?: SpineContext }).spine;
}

function keep(temps: Tensor[], t: Tensor): Tensor {
  temps.push(t);
  return t;
}

/** A dense copy of t broadcast to `shape`. */
function dense(t: Tensor, shape: readonly number[], temps: Tensor[]): Tensor {
  const e = keep(temps, t.expand(shape));
  return keep(temps, e.clone());
}

function addressOf(t: Tensor): number {
  const p = t.storage.devicePtr;
  if (p === undefined) throw new TypeError(`${t} is not a CUDA tensor`);
  return p + t.offset * t.itemsize;
}
