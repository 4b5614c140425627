import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { SECTION_NAMES, TUNING_SECTIONS, parseOverride, resolveTuning, type OverrideTuningFile } from '@fastkernels/backend-cuda';
import { UserError, errorMessage } from '@fastkernels/core';
import type { Argv } from 'yargs';
import { environment, safeAvailability } from '../env.js';
import type { Io } from '../io.js';
import { renderTable } from '../output/table.js';

/** The CUDA device's name when one is usable here (the file `show` picks by default), else undefined. */
function localDeviceName(): string | undefined {
  const cuda = environment().backends.find((b) => b.name === 'cuda');
  if (!cuda || !safeAvailability(cuda).available) return undefined;
  try {
    return cuda.devices()[0]?.name;
  } catch {
    return undefined;
  }
}

const describeKey = (section: string, key: string): string =>
  (TUNING_SECTIONS[section as keyof typeof TUNING_SECTIONS].shape as Record<string, { description?: string }>)[key]?.description ?? '';

/** `fastkernels tuning show`: the effective tuning, each value with the file it came from. */
export function runTuningShow(argv: { device?: string; json?: boolean }, io: Io): void {
  const device = argv.device ?? localDeviceName();
  const t = resolveTuning(device);
  if (argv.json) {
    io.out(JSON.stringify({ device: device ?? null, deviceFile: t.deviceFile, overrideFile: t.overrideFile ?? null, tuning: t.tuning, sources: t.sources }, null, 2) + '\n');
    return;
  }
  io.out(`device: ${device ?? 'none given or found'} -> tuning/${t.deviceFile}${t.overrideFile ? `, with FASTKERNELS_TUNING=${t.overrideFile} over it` : ''}\n\n`);
  const rows: string[][] = [];
  for (const s of SECTION_NAMES) {
    for (const [k, v] of Object.entries(t.tuning[s])) {
      const from = t.sources[`${s}.${k}`]!;
      rows.push([`${s}.${k}`, String(v), from === t.overrideFile ? 'override' : from, describeKey(s, k)]);
    }
  }
  io.out(renderTable([{ header: 'key' }, { header: 'value' }, { header: 'from' }, { header: 'what it does' }], rows));
}

/** `section.key=value` pairs as an override object (values are JSON where they parse: numbers, true/false). */
export function overrideFromSets(sets: readonly string[], description?: string): OverrideTuningFile {
  const out: Record<string, Record<string, unknown>> = {};
  for (const set of sets) {
    const m = /^([A-Za-z]+)\.([A-Za-z0-9]+)=(.*)$/.exec(set);
    if (!m) throw new UserError(`'${set}' is not section.key=value`, { field: '--set', fix: 'write e.g. --set linear.gemvMaxRows=0 (`fastkernels tuning show` lists the keys)' });
    const [, section, key, text] = m as unknown as [string, string, string, string];
    let value: unknown = text;
    try {
      value = JSON.parse(text);
    } catch {
      // a bare word: an enum value such as gemvLateTrigger=glu
    }
    (out[section] ??= {})[key] = value;
  }
  return parseOverride({ ...(description ? { description } : {}), ...out }, '--set');
}

/** `fastkernels tuning derive --set k=v ...`: an override file for FASTKERNELS_TUNING (stdout, or --out and its path). */
export function runTuningDerive(argv: { set?: string[]; out?: string; description?: string }, io: Io): void {
  const sets = argv.set ?? [];
  if (!sets.length) throw new UserError('nothing to set', { field: '--set', fix: 'pass one or more --set section.key=value (e.g. --set linear.gemvMaxRows=0)' });
  const text = JSON.stringify(overrideFromSets(sets, argv.description), null, 2) + '\n';
  if (!argv.out) {
    io.out(text);
    return;
  }
  const path = resolve(argv.out);
  try {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
  } catch (e) {
    throw new UserError(`cannot write it (${(e as NodeJS.ErrnoException).code ?? errorMessage(e)})`, { file: argv.out, field: '--out', fix: 'pass a writable path' });
  }
  io.out(`${path}\n`);
}

export function tuningCommand(io: Io) {
  return {
    command: 'tuning <action>',
    describe: "The CUDA backend's kernel launch choices (tuning files): show them, or derive an A/B override",
    builder: (y: Argv) =>
      y
        .positional('action', { choices: ['show', 'derive'] as const, describe: 'show: the effective tuning and where each value came from; derive: write an override file' })
        .option('device', { type: 'string', describe: 'show: the CUDA device name to pick the file for (default: this machine\'s GPU, else generic.json)' })
        .option('json', { type: 'boolean', describe: 'show: print it as JSON' })
        .option('set', { type: 'string', array: true, describe: 'derive: section.key=value (repeatable)' })
        .option('out', { type: 'string', describe: 'derive: write the file here and print its path (default: print the JSON)' })
        .option('description', { type: 'string', describe: 'derive: a description kept in the file' })
        .example('$0 tuning show --device "NVIDIA H200"', 'the H200 file, and FASTKERNELS_TUNING over it when set')
        .example('$0 tuning derive --set linear.gemvMaxRows=0 --out /tmp/no-gemv.json', 'an A/B file: cuBLASLt at M 1')
        .example('FASTKERNELS_TUNING=$($0 tuning derive --set launch.pdl=false --out /tmp/plain.json) $0 bench ...', 'run with it')
        .epilog('A tuning override is a partial tuning file: only the keys it names change; docs/tuning.md lists every key.'),
    handler: (argv: { action?: 'show' | 'derive'; device?: string; json?: boolean; set?: string[]; out?: string; description?: string }) => {
      if (argv.action === 'show') runTuningShow(argv, io);
      else runTuningDerive(argv, io);
    },
  };
}
