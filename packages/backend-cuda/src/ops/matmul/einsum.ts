/**
 * einsum on the CUDA backend, the way torch.einsum runs it: each operand's repeated letters become a diagonal view,
 * letters no other operand and not the output uses are summed out first (the generated reduction), then the operands
 * are contracted left to right, each pair as one strided-batched GEMM over permuted views: letters in both operands and
 * still needed are the batch, letters in both and no longer needed are K, the rest are M (left) and N (right). The
 * family patterns (MLA's absorbed 'bhd,hdk->bhk' / 'shc,hdc->shd', OpenFold3's triangle 'bikc,bjkc->bijc', attention
 * scores 'bhqd,bhkd->bhqk') are one GEMM each with the operands read in place where their dims merge; the last GEMM
 * writes straight into the output when the output order lets it, else into a temporary that is copied once.
 */
import { Tensor, callOp1, einsumPlan, type EinsumPlan } from '@fastkernels/core';
import type { GemmOps, StridedGemm } from './gemm.js';
import { newGemmPlan, planOutput } from './layout.js';

interface Term {
  t: Tensor;
  labels: string[];
  /** Whether `t` is ours to dispose (a view or a result made here). */
  owned: boolean;
}

/** One operand's letters made unique: a repeated letter reads the diagonal (its strides summed), as a view. */
export function diagonalView(t: Tensor, labels: readonly string[]): { t: Tensor; labels: string[] } | null {
  const uniq: string[] = [];
  const shape: number[] = [];
  const strides: number[] = [];
  labels.forEach((l, d) => {
    const i = uniq.indexOf(l);
    if (i < 0) {
      uniq.push(l);
      shape.push(t.shape[d]!);
      strides.push(t.strides[d]!);
    } else strides[i] += t.strides[d]!;
  });
  if (uniq.length === labels.length) return null;
  return { t: new Tensor({ storage: t.storage, dtype: t.dtype, shape, strides, offset: t.offset }), labels: uniq };
}

/**
 * Merge consecutive dims of `t` into groups of `counts[i]` dims each, as a view when each group's strides nest (size-1
 * dims ignored); null when some group does not.
 */
export function mergeDims(t: Tensor, counts: readonly number[]): Tensor | null {
  const shape: number[] = [];
  const strides: number[] = [];
  let d = 0;
  for (const n of counts) {
    let size = 1;
    let stride = 0;
    let inner = -1; // stride the next (outer) non-trivial dim must have
    for (let j = d + n - 1; j >= d; j--) {
      const s = t.shape[j]!;
      if (s === 1) continue;
      if (inner < 0) stride = t.strides[j]!;
      else if (t.strides[j] !== inner) return null;
      size *= s;
      inner = t.strides[j]! * s;
      if (s === 0) inner = 0;
    }
    shape.push(size);
    strides.push(size === 1 ? 1 : stride);
    d += n;
  }
  return new Tensor({ storage: t.storage, dtype: t.dtype, shape, strides, offset: t.offset });
}

/** mergeDims, or a contiguous copy merged (the copy is then what the view reads). */
function merged(ops: GemmOps, t: Tensor, counts: readonly number[], temps: Tensor[]): Tensor {
  const v = mergeDims(t, counts);
  if (v) {
    temps.push(v);
    return v;
  }
  const c = Tensor.empty(t.backend, t.shape, t.dtype, { device: t.device });
  temps.push(c);
  ops.copy(c, t);
  const m = mergeDims(c, counts)!;
  temps.push(m);
  return m;
}

export class CudaEinsum {
  private readonly outPlan = newGemmPlan();

  constructor(private readonly gemm: StridedGemm) {}

  run(ops: GemmOps, equation: string, operands: readonly Tensor[], out: Tensor): Tensor {
    const plan = einsumPlan(equation, operands.map((o) => o.shape));
    let terms: Term[] = operands.map((t, i) => ({ t, labels: [...plan.inputs[i]!], owned: false }));
    try {
      terms = terms.map((term, i) => this.prepare(term, i, terms, plan));
      while (terms.length > 1) {
        const [x, y] = terms as [Term, Term];
        const rest = terms.slice(2);
        const last = rest.length === 0;
        const z = this.contract(ops, x, y, rest, plan, last ? out : null);
        for (const u of [x, y]) if (u.owned) u.t.dispose();
        terms = [z, ...rest];
      }
      const r = terms[0]!;
      if (r.t === out) return out;
      // one operand left: its letters in the output's order, copied into the output
      const perm = plan.output.map((l) => r.labels.indexOf(l));
      const p = r.t.permute(perm);
      try {
        ops.copy(out, p);
      } finally {
        p.dispose();
      }
      return out;
    } finally {
      for (const u of terms) if (u.owned && u.t !== out) u.t.dispose();
    }
  }

  /** Diagonals, then the sum over letters only this operand has and the output lacks. */
  private prepare(term: Term, i: number, all: readonly Term[], plan: EinsumPlan): Term {
    const diag = diagonalView(term.t, term.labels);
    let cur: Term = diag ? { t: diag.t, labels: diag.labels, owned: true } : term;
    const drop: number[] = [];
    cur.labels.forEach((l, d) => {
      if (!plan.output.includes(l) && !all.some((o, j) => j !== i && o.labels.includes(l))) drop.push(d);
    });
    if (drop.length) {
      const s = callOp1('sum', [cur.t], { dim: drop, keepdim: false });
      if (cur.owned) cur.t.dispose();
      cur = { t: s, labels: cur.labels.filter((_, d) => !drop.includes(d)), owned: true };
    }
    return cur;
  }

  /** x ⋅ y over their shared letters that `rest` and the output no longer need: one strided-batched GEMM. */
  private contract(ops: GemmOps, x: Term, y: Term, rest: readonly Term[], plan: EinsumPlan, out: Tensor | null): Term {
    const keep = (l: string) => plan.output.includes(l) || rest.some((o) => o.labels.includes(l));
    const batch = x.labels.filter((l) => y.labels.includes(l) && keep(l));
    const kdims = x.labels.filter((l) => y.labels.includes(l) && !keep(l));
    const mdims = x.labels.filter((l) => !y.labels.includes(l));
    const ndims = y.labels.filter((l) => !x.labels.includes(l));
    const size = (l: string) => plan.sizes.get(l)!;
    const prod = (ls: readonly string[]) => ls.reduce((p, l) => p * size(l), 1);
    const temps: Tensor[] = [];
    try {
      // size-1 letters broadcast to the letter's size (stride 0), then [batch, M, K] and [batch, K, N]
      const xv = x.t.expand(x.labels.map(size));
      temps.push(xv);
      const yv = y.t.expand(y.labels.map(size));
      temps.push(yv);
      const xp = xv.permute([...batch, ...mdims, ...kdims].map((l) => x.labels.indexOf(l)));
      temps.push(xp);
      const yp = yv.permute([...batch, ...kdims, ...ndims].map((l) => y.labels.indexOf(l)));
      temps.push(yp);
      const a = merged(ops, xp, [batch.length, mdims.length, kdims.length], temps);
      const b = merged(ops, yp, [batch.length, kdims.length, ndims.length], temps);
      const zLabels = [...batch, ...mdims, ...ndims];
      const zShape3 = [prod(batch), prod(mdims), prod(ndims)];
      // the last contraction writes into the output when its [batch, M, N] order is a mergeable view of it
      if (out && zLabels.length === plan.output.length) {
        const ov = out.permute(zLabels.map((l) => plan.output.indexOf(l)));
        temps.push(ov);
        const o3 = mergeDims(ov, [batch.length, mdims.length, ndims.length]);
        if (o3) {
          temps.push(o3);
          this.outPlan.batch = zShape3[0]!;
          if (planOutput(o3.shape, o3.strides, this.outPlan)) {
            this.gemm.run(ops, o3, a, b);
            return { t: out, labels: [...plan.output], owned: false };
          }
        }
      }
      const z = Tensor.empty(x.t.backend, zLabels.map(size), x.t.dtype, { device: x.t.device });
      const z3 = z.view(zShape3);
      temps.push(z3);
      try {
        this.gemm.run(ops, z3, a, b);
      } catch (e) {
        z.dispose();
        throw e;
      }
      return { t: z, labels: zLabels, owned: true };
    } finally {
      for (const t of temps) t.dispose();
    }
  }
}
