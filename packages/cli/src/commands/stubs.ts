import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { UserError, errorMessage, type TaskDefinition } from '@fastkernels/core';
import type { Argv } from 'yargs';
import { baselineParameterNames } from '../candidates/cuda/load.js';
import { cudaStub, type StubFile } from '../candidates/stubs/cuda.js';
import { torchStub } from '../candidates/stubs/torch.js';
import { tritonStub } from '../candidates/stubs/triton.js';
import { stubSource } from '../candidates/stubs/ts.js';
import { environment, findTask } from '../env.js';
import { levelFlag, listFlag } from '../flags.js';
import type { Io } from '../io.js';

export { stubSource };

export const STUB_LANGS = ['ts', 'cuda', 'triton', 'torch'] as const;
export type StubLang = (typeof STUB_LANGS)[number];

/** The files of one task's stub in a language (paths relative to the stubs folder). */
export function stubFiles(task: TaskDefinition, lang: StubLang): StubFile[] {
  switch (lang) {
    case 'ts':
      return [{ rel: `L${task.level}/${task.stem}.ts`, text: stubSource(task) }];
    case 'cuda': {
      let params: readonly string[] = [];
      try {
        params = baselineParameterNames(task);
      } catch {
        // a baseline that cannot be built on the CPU: the skeleton takes no parameter pointers
      }
      return cudaStub(task, params);
    }
    case 'triton':
      return tritonStub(task);
    case 'torch':
      return torchStub(task);
  }
}

const NEXT: Readonly<Record<StubLang, string>> = {
  ts: 'fill in forward()',
  cuda: 'make the kernels fast (the skeletons run the baseline until you write the kernel and lift "when" in the .cu.json)',
  triton: 'make the kernels fast (the .ts launches the kernel in _<stem>_triton.py; off CUDA it runs the baseline)',
  torch: 'replace the reference ops in forward() (PyTorch candidates run in a Python with torch: FASTKERNELS_PYTHON)',
};

export function stubsCommand(io: Io, name = 'fastkernels') {
  return {
    command: 'stubs',
    describe: 'Write candidate skeletons with the right class names and signatures, in TypeScript, CUDA C++, Triton or PyTorch',
    builder: (y: Argv) =>
      y
        .option('out', { type: 'string', demandOption: true, describe: 'folder to write into (created if missing)' })
        .option('level', { type: 'number', describe: 'only tasks of this level' })
        .option('task', { type: 'string', array: true, describe: 'only these tasks (ids or stems; repeat or comma-separate)' })
        .option('lang', { type: 'string', choices: STUB_LANGS, default: 'ts', describe: 'ts: L<k>/<stem>.ts; cuda: <stem>.cu + <stem>.cu.json; triton: <stem>.ts + _<stem>_triton.py; torch: <stem>.py (the original format)' })
        .option('force', { type: 'boolean', default: false, describe: 'overwrite existing files' })
        .option('json', { type: 'boolean', describe: 'print the written files as JSON' })
        .example('$0 stubs --out my-kernels', 'a skeleton for every task')
        // yargs replaces $0 in the command column only, so the description names the CLI itself.
        .example('$0 stubs --out my-kernels --task rms_norm', `just L1/rms_norm.ts; then \`${name} bench --candidates my-kernels\``)
        .example('$0 stubs --lang cuda --out my-kernels --task rms_norm', 'L1/rms_norm.cu with a correct naive kernel and its binding L1/rms_norm.cu.json'),
    handler: (argv: { out: string; level?: number; task?: string[]; lang?: string; force?: boolean; json?: boolean }) => {
      const lang = (argv.lang ?? 'ts') as StubLang;
      if (!STUB_LANGS.includes(lang)) throw new UserError(`unknown language '${argv.lang}'`, { field: '--lang', fix: `one of ${STUB_LANGS.join(', ')}` });
      const env = environment();
      const level = levelFlag(argv.level);
      const picked = listFlag(argv.task).map((t) => findTask(env, t, '--task'));
      const tasks = (picked.length ? picked : env.tasks).filter((t) => level === undefined || t.level === level);
      if (!tasks.length) throw new UserError('selects no task', { field: '--level/--task', fix: 'run `fastkernels list` for the tasks and levels' });
      const planned = tasks.flatMap((t) => stubFiles(t, lang).map((f) => ({ task: t.id, file: join(argv.out, f.rel), text: f.text })));
      const clash = argv.force ? undefined : planned.find((p) => existsSync(p.file));
      if (clash) throw new UserError('already exists', { file: clash.file, fix: 'pass --force to overwrite, or another --out folder' });
      const written: { task: string; file: string }[] = [];
      for (const p of planned) {
        try {
          mkdirSync(dirname(p.file), { recursive: true });
          writeFileSync(p.file, p.text);
        } catch (e) {
          throw new UserError(`cannot write (${(e as NodeJS.ErrnoException).code ?? errorMessage(e)})`, { file: p.file, field: '--out', fix: 'pass a writable folder' });
        }
        written.push({ task: p.task, file: p.file });
      }
      if (argv.json) {
        io.out(JSON.stringify(written, null, 2) + '\n');
        return;
      }
      for (const w of written) io.out(`wrote ${w.file}\n`);
      const n = tasks.length;
      io.out(`${n} stub${n === 1 ? '' : 's'}; ${NEXT[lang]}, then: \`${name} bench --candidates ${argv.out}${lang === 'cuda' ? ' --backend cuda' : ''}\`\n`);
    },
  };
}
