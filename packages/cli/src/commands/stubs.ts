import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { UserError, errorMessage, type InitParam, type TaskDefinition, type TensorSpec } from '@fastkernels/core';
import type { Argv } from 'yargs';
import { environment, findTask, selectBackend } from '../env.js';
import { levelFlag, listFlag } from '../flags.js';
import type { Io } from '../io.js';
import { signature } from './info.js';

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

export function stubSource(task: TaskDefinition): string {
  const sig = signature(task);
  const usesDType = task.init.some((p) => p.type === 'dtype');
  const ret = task.outputs.length === 1 ? 'Tensor' : task.outputs.some((o) => o.optional) ? 'Tensor | Tensor[]' : 'Tensor[]';
  return [
    `// Candidate for ${task.id}: ${task.description}`,
    `// Mirrors ${task.mirrors}.`,
    `//   ${sig.constructor}`,
    `//   ${sig.forward}`,
    `// Keep the class name, the constructor and forward's parameters; \`fastkernels info ${task.id}\` shows the shapes.`,
    `import { Module, ${usesDType ? 'type DType, ' : ''}type Tensor } from '@fastkernels/core';`,
    '',
    `export class ${task.className} extends Module {`,
    `  constructor(${task.init.map((p, i) => tsParam(p, i, task.init)).join(', ')}) {`,
    '    super();',
    ...parameterHint(task).map((l) => `    ${l}`),
    ...task.init.map((p) => `    void ${p.name};`),
    '  }',
    '',
    `  forward(${[...task.inputs.map((s, i) => forwardParam(s, i, task.inputs)), ...task.hostInputs.map((h) => `${h.name}?: unknown`)].join(', ')}): ${ret} {`,
    ...[...task.inputs, ...task.hostInputs].map((s) => `    void ${s.name};`),
    `    throw new Error('NotImplemented: ${task.className}.forward (${task.id})');`,
    '  }',
    '}',
    '',
  ].join('\n');
}

export function stubsCommand(io: Io, name = 'fastkernels') {
  return {
    command: 'stubs',
    describe: 'Write candidate skeletons (L<k>/<stem>.ts) with the right class names and signatures',
    builder: (y: Argv) =>
      y
        .option('out', { type: 'string', demandOption: true, describe: 'folder to write into (created if missing)' })
        .option('level', { type: 'number', describe: 'only tasks of this level' })
        .option('task', { type: 'string', array: true, describe: 'only these tasks (ids or stems; repeat or comma-separate)' })
        .option('force', { type: 'boolean', default: false, describe: 'overwrite existing files' })
        .option('json', { type: 'boolean', describe: 'print the written files as JSON' })
        .example('$0 stubs --out my-kernels', 'a skeleton for every task')
        // yargs replaces $0 in the command column only, so the description names the CLI itself.
        .example('$0 stubs --out my-kernels --task rms_norm', `just L1/rms_norm.ts; then \`${name} bench --candidates my-kernels\``),
    handler: (argv: { out: string; level?: number; task?: string[]; force?: boolean; json?: boolean }) => {
      const env = environment();
      const level = levelFlag(argv.level);
      const picked = listFlag(argv.task).map((t) => findTask(env, t, '--task'));
      const tasks = (picked.length ? picked : env.tasks).filter((t) => level === undefined || t.level === level);
      if (!tasks.length) throw new UserError('selects no task', { field: '--level/--task', fix: 'run `fastkernels list` for the tasks and levels' });
      const written: { task: string; file: string }[] = [];
      for (const t of tasks) {
        const file = join(argv.out, `L${t.level}`, `${t.stem}.ts`);
        if (existsSync(file) && !argv.force) throw new UserError('already exists', { file, fix: 'pass --force to overwrite, or another --out folder' });
        try {
          mkdirSync(dirname(file), { recursive: true });
          writeFileSync(file, stubSource(t));
        } catch (e) {
          throw new UserError(`cannot write (${(e as NodeJS.ErrnoException).code ?? errorMessage(e)})`, { file, field: '--out', fix: 'pass a writable folder' });
        }
        written.push({ task: t.id, file });
      }
      if (argv.json) {
        io.out(JSON.stringify(written, null, 2) + '\n');
        return;
      }
      for (const w of written) io.out(`wrote ${w.file}\n`);
      io.out(`${written.length} stub${written.length === 1 ? '' : 's'}; fill in forward(), then: \`${name} bench --candidates ${argv.out}\`\n`);
    },
  };
}
