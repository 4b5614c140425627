/**
 * `fastkernels stubs --lang triton`: `L<k>/<stem>.ts`, the class that launches the kernel through `tritonKernel`, and
 * `L<k>/_<stem>_triton.py`, the @triton.jit source it imports as text (a `_` file is a helper, not a candidate).
 * For the tasks below the kernel is a correct simple one; for the others the class runs the baseline and the .py
 * holds a kernel to write. Off CUDA (or for other dtypes) the class runs the baseline, so the stub loads anywhere.
 */
import type { TaskDefinition } from '@fastkernels/core';
import type { StubFile } from './cuda.js';
import { stubSource } from './ts.js';

interface Simple {
  readonly py: string;
  readonly fn: string;
  /** The body of forward(), run on CUDA for f32 / f16 / bf16 inputs; `K` is the kernel. */
  readonly launch: string;
}

const SIMPLE: Readonly<Record<string, Simple>> = {
  'L1/silu_and_mul': {
    fn: 'silu_and_mul_kernel',
    py: `@triton.jit
def silu_and_mul_kernel(x_ptr, y_ptr, n, d, BLOCK: tl.constexpr):
    # x [T, 2d] (gate | up) -> y [T, d] = silu(gate) * up, one program per BLOCK outputs
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    row = offs // d
    col = offs % d
    g = tl.load(x_ptr + row * 2 * d + col, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * 2 * d + d + col, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (g / (1.0 + tl.exp(-g)) * u).to(y_ptr.dtype.element_ty), mask=mask)
`,
    launch: `    const d = x.shape[x.rank - 1]! / 2;
    const xc = x.contiguous();
    const y = Tensor.empty(this.ctx.backend, [...x.shape.slice(0, -1), d], x.dtype, { device: x.device });
    const n = y.numel;
    if (n > 0) K.launch(Math.ceil(n / 1024), [xc, y, n, d]);
    xc.dispose();
    return y;`,
  },
  'L1/relu': {
    fn: 'relu_kernel',
    py: `@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(y_ptr.dtype.element_ty), mask=mask)
`,
    launch: `    const xc = input.contiguous();
    const y = Tensor.empty(this.ctx.backend, input.shape, input.dtype, { device: input.device });
    if (y.numel > 0) K.launch(Math.ceil(y.numel / 1024), [xc, y, y.numel]);
    xc.dispose();
    return y;`,
  },
};

/** Tasks with a working Triton kernel in their stub. */
export const SIMPLE_TRITON_TASKS: readonly string[] = Object.keys(SIMPLE);

export function tritonStub(task: TaskDefinition): StubFile[] {
  const dir = `L${task.level}`;
  const pyName = `_${task.stem}_triton.py`;
  const simple = SIMPLE[task.id];
  const fn = simple?.fn ?? `${task.stem}_kernel`;
  const py = [
    `# Triton kernel of the ${task.id} candidate (${task.stem}.ts imports this file as text and launches it).`,
    'import triton',
    'import triton.language as tl',
    '',
    '',
    simple?.py ??
      [
        '@triton.jit',
        `def ${fn}(${[...task.inputs.map((s) => `${s.name}_ptr`), ...task.outputs.map((o) => `out_${o.name}_ptr`)].join(', ')}, n, BLOCK: tl.constexpr):`,
        `    # TODO: compute ${task.outputs.map((o) => o.name).join(', ')}; then launch it from ${task.stem}.ts instead of the baseline`,
        '    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)',
        '    mask = offs < n',
        `    tl.store(out_${task.outputs[0]!.name}_ptr + offs, tl.load(${task.inputs[0]?.name ?? 'x'}_ptr + offs, mask=mask), mask=mask)`,
        '',
      ].join('\n'),
  ].join('\n');
  const ts = simple ? simpleTs(task, simple, pyName) : stubSource(task, { body: 'baseline', note: `The Triton kernel to write is in ${pyName}; launch it with tritonKernel (see examples/candidates/triton-demo).` });
  return [
    { rel: `${dir}/${task.stem}.ts`, text: ts },
    { rel: `${dir}/${pyName}`, text: py },
  ];
}

function simpleTs(task: TaskDefinition, s: Simple, pyName: string): string {
  const inputs = task.inputs.map((i) => `${i.name}: Tensor`).join(', ');
  const first = task.inputs[0]!.name;
  return `// Candidate for ${task.id} in Triton: ${task.description}
// The kernel is in ${pyName} (imported as text); a correct simple kernel: make it fast. Off CUDA, or for dtypes other
// than f32 / f16 / bf16, forward runs the baseline.
import { Module, Tensor, type ModuleClass } from '@fastkernels/core';
import { tritonKernel } from '@fastkernels/backend-triton';
import SOURCE from './${pyName}';

const K = tritonKernel({ source: SOURCE, fn: '${s.fn}', name: '${pyName}', constexprs: { BLOCK: 1024 } });

export class ${task.className} extends Module {
  private readonly baseline: Module;

  constructor(...args: unknown[]) {
    super();
    const Baseline = this.ctx.registry.task('${task.id}')!.baseline as ModuleClass;
    this.baseline = new Baseline(...args);
    for (const [name, t] of this.baseline.namedParameters()) this.registerParameter(name, t);
  }

  forward(${inputs}): Tensor {
    if (this.ctx.backend.name !== 'cuda' || !['f32', 'f16', 'bf16'].includes(${first}.dtype)) {
      return (this.baseline.forward as (...a: unknown[]) => Tensor)(${task.inputs.map((i) => i.name).join(', ')});
    }
${s.launch}
  }
}
`;
}
