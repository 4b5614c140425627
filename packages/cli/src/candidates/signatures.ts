/**
 * What a candidate for a task implements, per language (`fastkernels info`): the TypeScript class, the CUDA C++ kernel
 * and the names its binding can use, the Triton kernel and its launcher, the PyTorch class in the original format.
 */
import type { TaskDefinition } from '@fastkernels/core';
import { snake } from './stubs/torch.js';

export type Lang = 'ts' | 'cuda' | 'triton' | 'torch';

const shape = (s: readonly (string | number)[]) => `[${s.join(', ')}]`;

/**
 * Lines per language; `sig` is the task's TypeScript signature (info.ts), `parameters` the baseline's parameters with
 * their shapes for the first CI case.
 */
export function languageSignatures(
  task: TaskDefinition,
  sig: { constructor: string; forward: string },
  parameters: readonly (readonly [string, readonly number[]])[],
): Record<Lang, string[]> {
  const dir = `L${task.level}`;
  const dims = [...new Set(task.inputs.flatMap((s) => s.shape.filter((d): d is string => typeof d === 'string')))];
  const scalars = task.init.filter((p) => ['int', 'float', 'bool'].includes(p.type));
  const ptr = (name: string, out: boolean) => `${out ? '' : 'const '}scalar_t* ${name.replace(/\W/g, '_')}`;
  const kernelParams = [
    ...task.inputs.map((s) => ptr(s.name, false)),
    ...parameters.map(([p]) => ptr(p, false)),
    ...task.outputs.map((o) => ptr(`out_${o.name}`, true)),
    ...dims.map((d) => `int ${d}`),
    ...scalars.map((p) => `${p.type === 'float' ? 'float' : 'int'} ${p.name}`),
  ];
  const torchInit = task.init.map((p) => (p.optional ? `${snake(p.name)}=${p.default === undefined ? 'None' : JSON.stringify(p.default)}` : snake(p.name)));
  const torchFwd = task.inputs.map((s) => (s.optional ? `${s.name}=None` : s.name));
  return {
    ts: [`${dir}/${task.stem}.ts:`, `  export class ${task.className} extends Module`, `    ${sig.constructor}`, `    ${sig.forward}`],
    cuda: [
      `${dir}/${task.stem}.cu with its binding ${dir}/${task.stem}.cu.json (scalar_t: the case's dtype, one entry per dtype, e.g. ${task.stem}_{dtype}):`,
      `  extern "C" __global__ void ${task.stem}_bf16(${kernelParams.join(', ')})`,
      `  tensors for pointer args: inputs ${task.inputs.map((s) => `${s.name}${s.optional ? '?' : ''} ${shape(s.shape)}`).join(', ')}` +
        `${parameters.length ? `; parameters ${parameters.map(([p, s]) => `${p} ${shape(s)}`).join(', ')} (at case ${task.cases.ci[0]!.name})` : ''}; outputs ${task.outputs.map((o) => `out.${o.name}${o.optional ? '?' : ''} ${shape(o.shape)}`).join(', ')}`,
      `  names in grid / block / args expressions: dims ${dims.join(', ') || '(none)'}${scalars.length ? `; constructor ${scalars.map((p) => p.name).join(', ')}` : ''}; dtype`,
    ],
    triton: [
      `${dir}/${task.stem}.ts launching, with tritonKernel (@fastkernels/backend-triton), a @triton.jit kernel kept in ${dir}/_${task.stem}_triton.py:`,
      `  def ${task.stem}_kernel(${[...task.inputs.map((s) => `${s.name}_ptr`), ...task.outputs.map((o) => `out_${o.name}_ptr`), ...dims, 'BLOCK: tl.constexpr'].join(', ')})`,
      `  the class: as for ts above`,
    ],
    torch: [
      `${dir}/${task.stem}.py (the original FastKernels / KernelBench format):`,
      `  class ${task.className}(torch.nn.Module):`,
      `      def __init__(${['self', ...torchInit].join(', ')})`,
      `      def forward(${['self', ...torchFwd].join(', ')})`,
    ],
  };
}
