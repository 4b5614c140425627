/**
 * The elementwise group of the op registry in float64: every op reads its (strided, broadcast) operands, converts them
 * to the common dtype as PyTorch does, applies core's ELEMENTWISE_MATH reference and rounds once on store.
 */
import {
  ELEMENTWISE_EXTRA_MATH, ELEMENTWISE_MATH, evalChain, operandDType, resolveChain, resultType, roundToDType,
  type Backend, type DType, type ElementwiseChainAttrs, type OpArg, type OpCall, type OpKernelTable, type Shape, type Tensor,
} from '@fastkernels/core';
import { gatherBroadcast, output } from '../strided.js';

/**
 * Operand values broadcast to `shape`. As PyTorch: tensors are first converted to the common dtype `tensorDType`,
 * scalars to `scalarDType` (see operandDType); the first `skip` operands (where's condition) are taken as they are.
 */
function operands(op: string, args: readonly OpArg[], shape: Shape, tensorDType: DType | undefined, scalarDType: DType | undefined, skip: number): (Float64Array | number)[] {
  return args.map((a, i) => {
    if (a === null) return NaN; // clamp's absent bound
    if (typeof a === 'number') return scalarDType !== undefined ? roundToDType(a, scalarDType) : a;
    const v = gatherBroadcast(a, shape, `${op} ${i}`);
    if (i >= skip && tensorDType !== undefined && a.dtype !== tensorDType) for (let k = 0; k < v.length; k++) v[k] = roundToDType(v[k]!, tensorDType);
    return v;
  });
}

/** The float64 reference of a (chainable or extra) elementwise op. */
const mathOf = (name: string) => ELEMENTWISE_MATH[name] ?? ELEMENTWISE_EXTRA_MATH[name]!;

/** The dtype tensor operands are converted to before the math (torch's common dtype; a unary op's output dtype). */
function commonDType(name: string, args: readonly OpArg[], out: DType): DType | undefined {
  if (name === 'to') return undefined;
  if (mathOf(name).arity === 1) return out === 'bool' ? undefined : out;
  return resultType(name === 'where' ? args.slice(1) : args, name);
}

function elementwise(backend: Backend) {
  return (call: OpCall): Tensor => {
    const name = call.op.name;
    const { shape, dtype } = call.outputs[0]!;
    const fn = mathOf(name).fn(call.attrs);
    const ops = operands(name, call.inputs, shape, commonDType(name, call.inputs, dtype), operandDType(name, call.inputs), name === 'where' ? 1 : 0);
    const n = shape.reduce((a, b) => a * b, 1);
    const at = (o: Float64Array | number, i: number) => (typeof o === 'number' ? o : o[i]!);
    const Y = new Float64Array(n);
    if (ops.length === 1) {
      const x = ops[0] as Float64Array;
      for (let i = 0; i < n; i++) Y[i] = fn(x[i]!);
    } else if (ops.length === 2) {
      const [a, b] = ops as [Float64Array | number, Float64Array | number];
      for (let i = 0; i < n; i++) Y[i] = fn(at(a, i), at(b, i));
    } else {
      const [a, b, c] = ops as [Float64Array | number, Float64Array | number, Float64Array | number];
      for (let i = 0; i < n; i++) Y[i] = fn(at(a, i), at(b, i), at(c, i));
    }
    return output(backend, shape, dtype, Y, name);
  };
}

function elementwiseChain(backend: Backend) {
  return (call: OpCall<ElementwiseChainAttrs>): Tensor => {
    const { shape, dtype } = call.outputs[0]!;
    const { steps, output: outStep } = resolveChain(call.inputs, call.attrs);
    const ins = call.inputs.map((t, i) => gatherBroadcast(t as Tensor, shape, `elementwise_chain input ${i}`));
    const n = shape.reduce((a, b) => a * b, 1);
    const vals = new Float64Array(ins.length);
    const scratch = new Float64Array(steps.length);
    const Y = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      for (let k = 0; k < ins.length; k++) vals[k] = ins[k]![i]!;
      Y[i] = evalChain(steps, outStep, vals, scratch);
    }
    return output(backend, shape, dtype, Y, 'elementwise_chain');
  };
}

export function registerElementwiseKernels(table: OpKernelTable, backend: Backend): void {
  const k = elementwise(backend);
  for (const name of [...Object.keys(ELEMENTWISE_MATH), ...Object.keys(ELEMENTWISE_EXTRA_MATH)]) table.register(name, k);
  table.register('elementwise_chain', elementwiseChain(backend));
}
