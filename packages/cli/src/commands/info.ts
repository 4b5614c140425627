import { DEFAULT_TOLERANCE, formatConstructor, toleranceFor, type InitParam, type TaskDefinition, type TensorSpec } from '@fastkernels/core';
import type { Argv } from 'yargs';
import { recordedBaselineTimes, resultsFolders, sameCase } from '../candidates/baseline-times.js';
import { baselineParameters } from '../candidates/cuda/load.js';
import { languageSignatures } from '../candidates/signatures.js';
import { environment, findTask } from '../env.js';
import type { Io } from '../io.js';
import { renderTable } from '../output/table.js';

const fmtShape = (s: TensorSpec) => `[${s.shape.join(', ')}]`;
const fmtInit = (p: InitParam) => `${p.name}${p.optional ? '?' : ''}: ${p.type === 'enum' && p.choices ? p.choices.map((c) => JSON.stringify(c)).join(' | ') : p.type}${p.default !== undefined ? ` = ${JSON.stringify(p.default)}` : ''}`;
const fmtTensor = (s: TensorSpec) => `${s.name}${s.optional ? '?' : ''}: ${s.dtype}${fmtShape(s)}`;

export function signature(task: TaskDefinition): { constructor: string; forward: string } {
  return {
    constructor: `${task.className}(${task.init.map(fmtInit).join(', ')})`,
    forward: `forward(${[...task.inputs.map(fmtTensor), ...task.hostInputs.map((h) => `${h.name}?: host`)].join(', ')}) -> ${task.outputs.length === 1 ? fmtTensor(task.outputs[0]!) : `[${task.outputs.map(fmtTensor).join(', ')}]`}`,
  };
}

export function infoCommand(io: Io) {
  return {
    command: 'info <task>',
    describe: "Show one task's interface: what to implement per language (TypeScript, CUDA C++, Triton, PyTorch), shapes, dtypes, tolerance, the baseline's recorded time",
    builder: (y: Argv) =>
      y
        .positional('task', { type: 'string', describe: 'task id (L1/rms_norm) or its stem (rms_norm)' })
        .option('json', { type: 'boolean', describe: 'print the task metadata as JSON' })
        .option('results', { type: 'string', describe: 'results folder with <device>/kernels.json [default: ./bench/results, then the repository\'s]' })
        .example('$0 info L1/rms_norm', 'what a candidate for RMSNorm must look like')
        .example('$0 info silu_and_mul --json', 'the same as JSON'),
    handler: (argv: { task?: string; json?: boolean; results?: string }) => {
      const task = findTask(environment(), String(argv.task ?? ''), '<task>');
      const sig = signature(task);
      let parameters: [string, number[]][] = [];
      try {
        parameters = baselineParameters(task);
      } catch {
        // a baseline that cannot be built on the CPU: the signatures list no parameters
      }
      const languages = languageSignatures(task, sig, parameters);
      const recorded = recordedBaselineTimes(task.id, resultsFolders(argv.results));
      const dtypes = [...new Set([...task.cases.ci, ...task.cases.production].map((c) => c.dtype))];
      const tolerance = Object.fromEntries(dtypes.map((d) => [d, toleranceFor(task, d)]));
      if (argv.json) {
        const { baseline: _b, makeInputs: _m, initParameters: _i, collectOutputs: _c, reference: _r, work: _w, hostArgs: _h, ...meta } = task;
        io.out(JSON.stringify({ ...meta, signature: sig, effectiveTolerance: tolerance, languages, baselineTimes: recorded.runs }, null, 2) + '\n');
        return;
      }
      const lines = [
        `${task.id}  (level ${task.level}, class ${task.className})`,
        `  ${task.description}`,
        '',
        `mirrors:       ${task.mirrors}`,
        `family:        ${task.family.join(', ')}`,
        `architectures: ${task.architectures.join(', ')}`,
        `imports:       ${task.imports.length ? task.imports.join(', ') : '(none: a leaf kernel)'}`,
        ...(task.worldSize > 1
          ? [task.rankAwareCases
            ? `world size:    ${task.worldSize} ranks of a tensor-parallel group (bench runs it with \`--tp ${task.worldSize}\` or under \`fastkernels launch --nproc ${task.worldSize}\`; skipped otherwise)`
            : `world size:    ${task.worldSize} ranks of a tensor-parallel group (bench skips it: its cases describe the unsharded layer, not one rank's part)`]
          : []),
        '',
        'constructor:',
        `  ${sig.constructor}`,
        ...task.init.filter((p) => p.doc).map((p) => `    ${p.name}: ${p.doc}`),
        'forward:',
        `  ${sig.forward}`,
        ...[...task.inputs, ...task.outputs].filter((s) => s.doc).map((s) => `    ${s.name}: ${s.doc}`),
        ...task.hostInputs.map((h) => `    ${h.name}: ${h.doc} (a host value, the same for baseline and candidate; read only)`),
        '  (act = the case\'s activation dtype; letters are the case dims)',
        '',
        `implement it in one of (\`fastkernels stubs --lang ts|cuda|triton|torch --task ${task.id}\` writes a skeleton):`,
        ...(['ts', 'cuda', 'triton', 'torch'] as const).flatMap((l) => [`  ${{ ts: 'TypeScript', cuda: 'CUDA C++', triton: 'Triton', torch: 'PyTorch' }[l]}: ${languages[l][0]}`, ...languages[l].slice(1).map((x) => `  ${x}`)]),
        '',
        'tolerance (atol, rtol; a tensor passes when >= 99% of its elements are within):',
        ...dtypes.map((d) => `  ${d.padEnd(8)} atol=${tolerance[d]!.atol}, rtol=${tolerance[d]!.rtol}${task.tolerance[d] ? ` (task override; default ${DEFAULT_TOLERANCE[d].atol}, ${DEFAULT_TOLERANCE[d].rtol})` : ''}`),
        '',
      ];
      io.out(lines.join('\n') + '\n');
      for (const kind of ['ci', 'production'] as const) {
        io.out(`${kind} cases:\n`);
        io.out(renderTable(
          [{ header: 'case' }, { header: 'dtype' }, { header: 'dims' }, { header: 'init' }, { header: 'options' }],
          task.cases[kind].map((c) => [
            c.name, c.dtype,
            Object.entries(c.dims).map(([k, v]) => `${k}=${v}`).join(' '),
            JSON.stringify(c.init),
            Object.keys(c.options).length ? JSON.stringify(c.options) : '',
          ]),
          '  ',
        ));
      }
      const last = recorded.runs[0];
      if (last) {
        io.out(`\nbaseline time, last recorded run (${last.file}: ${last.device}${last.date ? `, ${last.date}` : ''}${last.commit ? `, commit ${last.commit}` : ''}):\n`);
        const prod = task.cases.production;
        io.out(renderTable(
          [{ header: 'case' }, { header: 'dtype' }, { header: 'dims' }, { header: 'baseline ms', align: 'right' }, { header: 'best torch ms', align: 'right' }, { header: 'production case' }],
          last.rows.map((r) => [
            r.case, r.dtype,
            Object.entries(r.dims).map(([k, v]) => `${k}=${v}`).join(' '),
            r.ms === null ? '-' : r.ms.toFixed(4),
            r.torchMs === null ? '-' : r.torchMs.toFixed(4),
            prod.find((c) => sameCase(r, c))?.name ?? '',
          ]),
          '  ',
        ));
      } else {
        io.out(`\nbaseline time: no recorded GPU run has ${task.id} (bench/results/<device>/kernels.json; \`bench/run kernels\` on the GPU host records one)\n`);
      }
      for (const s of recorded.skipped) io.out(`  (skipped ${s})\n`);
      io.out(`\nA candidate: export class ${task.className} extends Module with ${formatConstructor(task)} and the forward above, in L${task.level}/${task.stem}.ts (\`fastkernels stubs --out DIR --task ${task.id}\` writes one).\n`);
    },
  };
}
