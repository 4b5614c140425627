/**
 * Registry calls -> generated-kernel expressions: a single elementwise op (gelu, add(x, 2), where, clamp, to) or an
 * `elementwise_chain` (core/src/ops/elementwise.ts, docs/ops.md) becomes an Expr over the tensor inputs it reads.
 * Semantics are the registry's: add / sub take alpha; div's rounding_mode picks trunc / floor; clamp's absent bound is
 * null; chain constants are rounded as PyTorch rounds a Python scalar operand (ResolvedStep.operandDType); a Python
 * number passed to a single op is a runtime scalar (a kernel argument, rounded the same way by the caller).
 */
import { roundToDType, type DType, type ResolvedStep } from '@fastkernels/core';
import type { ExprNode, Expr, Operand } from './expr.js';

/** How a step argument resolves: an operand, or null for clamp's absent bound. */
type ArgOf = (k: number) => Operand | null;

/**
 * Append the nodes of one registry op (its name, parsed attrs and operands) to `nodes`; returns the node holding the
 * result. Throws for an op the generated kernels do not have.
 */
export function appendOp(nodes: ExprNode[], op: string, attrs: Readonly<Record<string, unknown>>, argOf: ArgOf, arity: number): number {
  const push = (n: ExprNode) => nodes.push(n) - 1;
  const req = (k: number): Operand => {
    const a = argOf(k);
    if (a === null) throw new RangeError(`${op}: operand ${k} is absent`);
    return a;
  };
  const args = () => Array.from({ length: arity }, (_, k) => req(k));
  switch (op) {
    case 'add':
    case 'sub': {
      const alpha = typeof attrs.alpha === 'number' ? attrs.alpha : 1;
      if (alpha === 1) return push({ op, args: args() });
      const scaled = push({ op: 'mul', args: [req(1), { scalar: alpha }] });
      return push({ op, args: [req(0), { node: scaled }] });
    }
    case 'div': {
      const mode = attrs.rounding_mode;
      return push({ op: mode === 'trunc' ? 'div_trunc' : mode === 'floor' ? 'div_floor' : 'div', args: args() });
    }
    case 'clamp': {
      let cur = req(0);
      const lo = argOf(1);
      const hi = argOf(2);
      let last = -1;
      if (lo !== null) cur = { node: (last = push({ op: 'clamp_min', args: [cur, lo] })) };
      if (hi !== null) last = push({ op: 'clamp_max', args: [cur, hi] });
      if (last < 0) throw new RangeError('clamp: at least one of min and max must be given');
      return last;
    }
    case 'masked_fill': // (input, mask, value): value where mask, else input; the store rounds to input's dtype
      return push({ op: 'where', args: [req(1), req(2), req(0)] });
    case 'gelu':
      return push({ op, args: args(), attrs: { approximate: String(attrs.approximate ?? 'none') } });
    case 'softplus':
      return push({ op, args: args(), attrs: { beta: Number(attrs.beta ?? 1), threshold: Number(attrs.threshold ?? 20) } });
    case 'to':
      return push({ op, args: args(), attrs: { dtype: String(attrs.dtype) } });
    default: {
      // numeric attrs pass through (leaky_relu's negative_slope, elu's alpha)
      const numeric = Object.entries(attrs).filter(([, v]) => typeof v === 'number');
      return push(numeric.length ? { op, args: args(), attrs: Object.fromEntries(numeric) as Record<string, number> } : { op, args: args() });
    }
  }
}

/** The chain inputs each step reads, transitively from the output step (an unread input is not loaded, nor broadcast). */
function liveSteps(steps: readonly ResolvedStep[], output: number): boolean[] {
  const live = steps.map(() => false);
  live[output] = true;
  for (let i = output; i >= 0; i--) {
    if (!live[i]) continue;
    for (const a of steps[i]!.args) if (a && 'step' in a) live[a.step] = true;
  }
  return live;
}

/**
 * An elementwise_chain (resolved against its inputs) as one Expr. `inputs` lists the chain inputs the expression reads,
 * in the order of its inputs (x0 = chain input inputs[0], ...).
 */
export function chainToExpr(steps: readonly ResolvedStep[], output: number): { expr: Expr; inputs: number[] } {
  const live = liveSteps(steps, output);
  const inputs: number[] = [];
  const inputSlot = new Map<number, number>();
  const stepNode: number[] = [];
  const nodes: ExprNode[] = [];
  for (let i = 0; i <= output; i++) {
    if (!live[i]) continue;
    const s = steps[i]!;
    const argOf: ArgOf = (k) => {
      const a = s.args[k];
      if (a === null || a === undefined) return null;
      if ('input' in a) {
        let slot = inputSlot.get(a.input);
        if (slot === undefined) {
          slot = inputs.push(a.input) - 1;
          inputSlot.set(a.input, slot);
        }
        return { input: slot };
      }
      if ('step' in a) return { node: stepNode[a.step]! };
      return { scalar: s.operandDType ? roundToDType(a.value, s.operandDType) : a.value };
    };
    stepNode[i] = appendOp(nodes, s.op, s.attrs, argOf, s.args.length);
  }
  // the result must be the last node: a chain whose output step is a plain reference of an earlier one cannot occur
  // (every step appends at least one node)
  return { expr: { inputs: inputs.length, nodes }, inputs };
}

/**
 * A single op over call arguments (tensors, numbers, nulls): tensors become inputs in order, numbers runtime scalars.
 * Returns the expression and, per call argument, its role: 'input' k, 'param' k or null.
 */
export function singleOpExpr(op: string, attrs: Readonly<Record<string, unknown>>, kinds: readonly ('tensor' | 'number' | 'null')[]): Expr {
  let nIn = 0;
  let nParam = 0;
  const operands = kinds.map((k): Operand | null => (k === 'tensor' ? { input: nIn++ } : k === 'number' ? { param: nParam++ } : null));
  const nodes: ExprNode[] = [];
  appendOp(nodes, op, attrs, (k) => operands[k] ?? null, kinds.length);
  return { inputs: nIn, params: nParam, nodes };
}

/** A Python-number operand as PyTorch rounds it for this op (the caller passes the resolved dtype, or undefined). */
export function roundScalar(v: number, dtype: DType | undefined): number {
  return dtype ? roundToDType(v, dtype) : v;
}
