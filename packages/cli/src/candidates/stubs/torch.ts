/**
 * `fastkernels stubs --lang torch`: `L<k>/<stem>.py` in the original FastKernels / KernelBench format, a
 * `torch.nn.Module` with the production class name and its Python signature (snake_case). For the tasks below its
 * forward calls the reference PyTorch op(s); for the others it raises NotImplementedError. They are run by the
 * PyTorch candidate worker (candidates/torch/), on any backend with a Python that has torch.
 */
import type { InitParam, TaskDefinition } from '@fastkernels/core';
import type { StubFile } from './cuda.js';

/** hiddenSize -> hidden_size. */
export const snake = (s: string): string => s.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();

function pyLiteral(v: unknown): string {
  if (v === undefined || v === null) return 'None';
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : v > 0 ? "float('inf')" : "float('-inf')";
  return JSON.stringify(v);
}

const pyParam = (p: InitParam, i: number, params: readonly InitParam[]): string =>
  p.optional && params.slice(i).every((q) => q.optional) ? `${snake(p.name)}=${pyLiteral(p.default)}` : snake(p.name);

/** forward bodies calling PyTorch's own ops (the vLLM modules' native forward). */
const REFERENCE: Readonly<Record<string, { init?: string[]; forward: string[] }>> = {
  'L1/silu_and_mul': { forward: ['d = x.shape[-1] // 2', 'return F.silu(x[..., :d]) * x[..., d:]'] },
  'L1/relu': { forward: ['return F.relu(input)'] },
  'L1/rms_norm': {
    init: ['self.weight = torch.nn.Parameter(torch.ones(hidden_size))', 'self.variance_epsilon = eps'],
    forward: [
      'if residual is not None:',
      '    x = x + residual',
      '    residual = x',
      'y = F.rms_norm(x.float(), (x.shape[-1],), self.weight.float(), self.variance_epsilon).to(x.dtype)',
      'return y if residual is None else (y, residual)',
    ],
  },
};

export const REFERENCE_TORCH_TASKS: readonly string[] = Object.keys(REFERENCE);

export function torchStub(task: TaskDefinition): StubFile[] {
  const ref = REFERENCE[task.id];
  const inputs = task.inputs.map((s, i) => (s.optional && task.inputs.slice(i).every((q) => q.optional) ? `${s.name}=None` : s.name));
  const init = task.init.map((p, i) => pyParam(p, i, task.init));
  const lines = [
    `"""Candidate for ${task.id} (PyTorch): ${task.description}`,
    '',
    `Mirrors ${task.mirrors}; \`fastkernels info ${task.id}\` shows the shapes, dtypes and tolerance.`,
    ref ? 'forward calls the reference PyTorch op(s): replace them with your kernel.' : 'Write forward (a custom CUDA / Triton kernel, or PyTorch ops).',
    '"""',
    'import torch',
    'import torch.nn.functional as F',
    '',
    '',
    `class ${task.className}(torch.nn.Module):`,
    `    def __init__(${['self', ...init].join(', ')}):`,
    '        super().__init__()',
    ...(ref?.init ?? task.init.map((p) => `self.${snake(p.name)} = ${snake(p.name)}`)).map((l) => `        ${l}`),
    '',
    `    def forward(${['self', ...inputs].join(', ')}):`,
    ...(ref ? ref.forward : [`raise NotImplementedError("${task.className}.forward (${task.id})")`]).map((l) => `        ${l}`),
    '',
  ];
  return [{ rel: `L${task.level}/${task.stem}.py`, text: lines.join('\n') }];
}
