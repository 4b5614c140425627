/**
 * `fastkernels stubs --lang ts`: `L<k>/<stem>.ts`, a class with the baseline's name, constructor and forward. Its
 * body throws NotImplemented (the default), or runs the baseline module (`body: 'baseline'`: the Triton stub of a
 * task without a simple kernel, which then runs as written).
 */
import { errorMessage, type InitParam, type TaskDefinition, type TensorSpec } from '@fastkernels/core';
import { signature } from '../../commands/info.js';
import { environment, selectBackend } from '../../env.js';

const tsType = (p: InitParam): string => {
  switch (p.type) {
    case 'int':
    case 'float':
      return 'number';
    case 'bool':
      return 'boolean';
    case 'string':
      return 'string';
    case 'dtype':
      return 'DType';
    case 'enum':
      return p.choices?.length ? p.choices.map((c) => JSON.stringify(c)).join(' | ') : 'string';
    default:
      return 'Record<string, unknown>';
  }
};

function tsParam(p: InitParam, i: number, params: readonly InitParam[]): string {
  // A JS default only where every later parameter is optional too (keeps Function.length right).
  const tailOptional = params.slice(i).every((q) => q.optional);
  if (p.optional && p.default !== undefined && tailOptional) return `${p.name}: ${tsType(p)} = ${JSON.stringify(p.default)}`;
  if (p.optional && tailOptional) return `${p.name}?: ${tsType(p)}`;
  return `${p.name}: ${tsType(p)}`;
}

function forwardParam(s: TensorSpec, i: number, specs: readonly TensorSpec[]): string {
  const tailOptional = specs.slice(i).every((q) => q.optional);
  return s.optional && tailOptional ? `${s.name}?: Tensor | null` : `${s.name}: Tensor${s.optional ? ' | null' : ''}`;
}

/** The baseline's parameters for the first CI case, as a hint (names and shapes must match for loadStateDict). */
function parameterHint(task: TaskDefinition): string[] {
  const c = task.cases.ci[0]!;
  try {
    const env = environment();
    const backend = selectBackend(env, 'cpu');
    const m = env.registry.createIn({ backend, device: 0, dtype: c.dtype, registry: env.registry }, task.id, ...c.init);
    const params = m.namedParameters().map(([k, t]) => `${k} [${t.shape.join(', ')}] ${t.dtype}`);
    m.dispose();
    if (!params.length) return ['// The baseline has no parameters.'];
    return [`// The baseline's parameters for case '${c.name}' (init ${JSON.stringify(c.init)}); register the same names`, '// and shapes (this.parameter(name, shape)) so the harness can copy the weights in:', ...params.map((p) => `//   ${p}`)];
  } catch (e) {
    return [`// (could not build the baseline to list its parameters: ${errorMessage(e)})`];
  }
}

export interface TsStubOptions {
  /** 'throw' (default): forward throws NotImplemented; 'baseline': the class builds the baseline and forwards to it. */
  readonly body?: 'throw' | 'baseline';
  /** A line for the header comment. */
  readonly note?: string;
}

export function stubSource(task: TaskDefinition, options: TsStubOptions = {}): string {
  const sig = signature(task);
  const baseline = options.body === 'baseline';
  const args = [...task.inputs, ...task.hostInputs].map((s) => s.name).join(', ');
  const usesDType = task.init.some((p) => p.type === 'dtype');
  const ret = task.outputs.length === 1 ? 'Tensor' : task.outputs.some((o) => o.optional) ? 'Tensor | Tensor[]' : 'Tensor[]';
  return [
    `// Candidate for ${task.id}: ${task.description}`,
    `// Mirrors ${task.mirrors}.`,
    `//   ${sig.constructor}`,
    `//   ${sig.forward}`,
    `// Keep the class name, the constructor and forward's parameters; \`fastkernels info ${task.id}\` shows the shapes.`,
    ...(options.note ? [`// ${options.note}`] : []),
    `import { Module, ${usesDType ? 'type DType, ' : ''}${baseline ? 'type ModuleClass, ' : ''}type Tensor } from '@fastkernels/core';`,
    '',
    `export class ${task.className} extends Module {`,
    ...(baseline ? ['  private readonly baseline: Module;', ''] : []),
    `  constructor(${task.init.map((p, i) => tsParam(p, i, task.init)).join(', ')}) {`,
    '    super();',
    ...(baseline
      ? [
          '    // Runs the baseline (its parameters are this class\'s, so the harness loads the same weights) until forward is replaced.',
          `    const Baseline = this.ctx.registry.task('${task.id}')!.baseline as ModuleClass;`,
          `    this.baseline = new Baseline(${task.init.map((p) => p.name).join(', ')});`,
          '    for (const [name, t] of this.baseline.namedParameters()) this.registerParameter(name, t);',
        ]
      : [...parameterHint(task).map((l) => `    ${l}`), ...task.init.map((p) => `    void ${p.name};`)]),
    '  }',
    '',
    `  forward(${[...task.inputs.map((s, i) => forwardParam(s, i, task.inputs)), ...task.hostInputs.map((h) => `${h.name}?: unknown`)].join(', ')}): ${ret} {`,
    ...(baseline
      ? [`    return (this.baseline.forward as (...a: unknown[]) => ${ret})(${args});`]
      : [...[...task.inputs, ...task.hostInputs].map((s) => `    void ${s.name};`), `    throw new Error('NotImplemented: ${task.className}.forward (${task.id})');`]),
    '  }',
    '}',
    '',
  ].join('\n');
}

