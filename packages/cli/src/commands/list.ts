import type { Argv } from 'yargs';
import { environment } from '../env.js';
import { levelFlag } from '../flags.js';
import { renderTable } from '../output/table.js';
import type { Io } from '../io.js';

export function listCommand(io: Io) {
  return {
    command: 'list',
    describe: 'List the tasks: id, level, family, class and the production module each mirrors',
    builder: (y: Argv) =>
      y
        .option('level', { type: 'number', describe: 'only this level (1-4)' })
        .option('family', { type: 'string', describe: 'only tasks of a family whose name contains this (case-insensitive)' })
        .option('json', { type: 'boolean', describe: 'print a JSON array instead of the table' })
        .example('$0 list', 'every task, as a table')
        .example('$0 list --level 1 --json', 'the L1 tasks as JSON (id, className, mirrors, ...)')
        .example('$0 list --family llm', 'tasks of the "Dense & MoE LLMs" family'),
    handler: (argv: { level?: number; family?: string; json?: boolean }) => {
      const level = levelFlag(argv.level);
      const family = argv.family?.toLowerCase();
      const tasks = environment().tasks.filter((t) => (level === undefined || t.level === level) && (!family || t.family.some((f) => f.toLowerCase().includes(family))));
      if (argv.json) {
        io.out(JSON.stringify(tasks.map((t) => ({
          id: t.id, level: t.level, className: t.className, family: t.family, architectures: t.architectures, mirrors: t.mirrors, description: t.description,
        })), null, 2) + '\n');
        return;
      }
      io.out(renderTable(
        [{ header: 'task' }, { header: 'level', align: 'right' }, { header: 'family' }, { header: 'class' }, { header: 'mirrors' }],
        // a task shared by several families shows its first and how many more (--json and `info` list them all)
        tasks.map((t) => [t.id, String(t.level), t.family.length > 1 ? `${t.family[0]} +${t.family.length - 1}` : (t.family[0] ?? ''), t.className, t.mirrors]),
      ));
      io.out(`${tasks.length} task${tasks.length === 1 ? '' : 's'}. \`fastkernels info <task>\` shows one task's interface.\n`);
    },
  };
}
