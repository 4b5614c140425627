/**
 * Registry kernels of the elementwise group on the generated kernels: every unary / binary op, where, clamp, to and
 * elementwise_chain. Each call finds its runner without string work when the attrs object is the one it saw before
 * (prepareOp, a module holding its attrs): a WeakMap by attrs, then a number for which arguments are tensors /
 * numbers / null (single ops) or the input dtypes (chains, whose constants round per dtype). A fresh output is
 * channels-last when its first input of the output's shape is (PyTorch's rule; elementwise-plan's outputMemoryOrder).
 */
import { BINARY_OPS, DTYPES, Tensor, UNARY_OPS, hasOp, operandDType, resolveChain, type DType, type ElementwiseChainAttrs, type OpCall, type OpKernel, type OpKernelTable, type OpSupports } from '@fastkernels/core';
import type { CudaRuntime } from '../runtime.js';
import { isGenDType } from './ctypes.js';
import { ElementwiseRunner } from './elementwise.js';
import { outputMemoryOrder } from './elementwise-plan.js';
import { MAX_EW_RANK } from './elementwise-source.js';
import type { GenKernelCache } from './gen-cache.js';
import { chainToExpr, roundScalar, singleOpExpr } from './translate.js';

/**
 * The activations and math core declares beside the chainable ones (with decompositions); registered where core has
 * them, so a generated kernel replaces the decomposition.
 */
export const GENERATED_EXTRA_OPS: readonly string[] = [
  'leaky_relu', 'elu', 'hardsigmoid', 'hardswish', 'mish', 'log1p', 'expm1', 'floor', 'ceil', 'trunc', 'sign',
  'logical_not', 'logical_and', 'logical_or', 'remainder', 'fmod',
];

export const GENERATED_ELEMENTWISE_OPS: readonly string[] = [...UNARY_OPS, ...BINARY_OPS, 'where', 'clamp', 'to', 'masked_fill'];

const DCODE = new Map<DType, number>(DTYPES.map((d, i) => [d, i + 1]));

/** Runners cached by attrs object, then by a numeric key; a canonical-text fallback for fresh attrs objects. */
class RunnerCache<V> {
  private readonly byAttrs = new WeakMap<object, Map<number, V>>();
  private readonly byText = new Map<string, V>();

  get(attrs: object, code: number, text: () => string, make: () => V): V {
    let m = this.byAttrs.get(attrs);
    if (!m) this.byAttrs.set(attrs, (m = new Map()));
    let v = m.get(code);
    if (v === undefined) {
      const t = `${text()}#${code}`;
      v = this.byText.get(t);
      if (v === undefined) this.byText.set(t, (v = make()));
      m.set(code, v);
    }
    return v;
  }
}

/** Supported when every tensor operand and the output have a generated dtype and the rank fits the strided class. */
const supports: OpSupports = (call) => {
  const out = call.outputs[0]!;
  if (!isGenDType(out.dtype)) return `output dtype ${out.dtype} is not generated (fp8 goes through the converting copy)`;
  if (out.shape.length > MAX_EW_RANK) return `rank ${out.shape.length} > ${MAX_EW_RANK}`;
  for (const a of call.inputs) if (a instanceof Tensor && !isGenDType(a.dtype)) return `input dtype ${a.dtype} is not generated`;
  return true;
};

export function registerElementwiseKernels(table: OpKernelTable, cache: GenKernelCache, runtime: () => CudaRuntime): void {
  for (const op of [...GENERATED_ELEMENTWISE_OPS, ...GENERATED_EXTRA_OPS.filter((o) => hasOp(o))]) {
    // one cache per op: an attrs object is only ever looked up for the op it was parsed for
    const singles = new RunnerCache<ElementwiseRunner>();
    const kernel: OpKernel = (call: OpCall) => {
      const args = call.inputs;
      let code = 0;
      let hasNumber = false;
      for (let k = 0; k < args.length; k++) {
        const a = args[k];
        const kind = a === null ? 0 : typeof a === 'number' ? 1 : 2;
        if (kind === 1) hasNumber = true;
        code = code * 3 + kind;
      }
      const runner = singles.get(call.attrs, code, () => `${op}|${JSON.stringify(call.attrs)}`, () =>
        new ElementwiseRunner(singleOpExpr(op, call.attrs, args.map((a) => (a === null ? 'null' : typeof a === 'number' ? 'number' : 'tensor'))), cache, runtime),
      );
      const tensors: Tensor[] = [];
      const params: number[] = [];
      // masked_fill's value is cast to the input's dtype (PyTorch); the other ops round as torch.result_type says
      const scalarDType = !hasNumber ? undefined : op === 'masked_fill' ? (args[0] as Tensor).dtype : operandDType(op, args);
      for (const a of args) {
        if (a instanceof Tensor) tensors.push(a);
        else if (typeof a === 'number') params.push(roundScalar(a, scalarDType));
      }
      return run(runner, call, tensors, params);
    };
    table.register(op, kernel, supports);
  }

  const chains = new RunnerCache<{ runner: ElementwiseRunner; inputs: number[] }>();
  table.register(
    'elementwise_chain',
    (call: OpCall<ElementwiseChainAttrs>) => {
      const args = call.inputs;
      let code = 0;
      for (const a of args) code = code * 16 + (a instanceof Tensor ? DCODE.get(a.dtype)! : 0);
      const c = chains.get(call.attrs, code, () => JSON.stringify(call.attrs), () => {
        const { steps, output } = resolveChain(args, call.attrs);
        const { expr, inputs } = chainToExpr(steps, output);
        return { runner: new ElementwiseRunner(expr, cache, runtime), inputs };
      });
      const tensors = c.inputs.map((i) => args[i] as Tensor);
      return run(c.runner, call, tensors, NO_PARAMS);
    },
    (call) => (call.inputs.length > 12 ? 'more than 12 chain inputs' : supports(call)),
  );
}

const NO_PARAMS: readonly number[] = [];

function run(runner: ElementwiseRunner, call: OpCall<any>, tensors: readonly Tensor[], params: readonly number[]): Tensor {
  const meta = call.outputs[0]!;
  const out = emptyInOrder(call.backend, meta.shape, meta.dtype, tensors[0]?.device ?? 0, outputMemoryOrder(meta.shape, tensors));
  try {
    runner.run(out, tensors, params);
  } catch (e) {
    out.dispose();
    throw e;
  }
  return out;
}

/** A fresh tensor of `shape` laid out in memory in `order` (outermost first; null: contiguous), viewed in logical order. */
function emptyInOrder(backend: Tensor['backend'], shape: readonly number[], dtype: DType, device: number, order: readonly number[] | null): Tensor {
  if (!order) return Tensor.empty(backend, shape, dtype, { device });
  const base = Tensor.empty(backend, order.map((d) => shape[d]!), dtype, { device });
  const inverse = new Array<number>(order.length);
  order.forEach((d, i) => (inverse[d] = i));
  const out = base.permute(inverse);
  base.dispose();
  return out;
}
