// Merges the vision suite's per-model files (WORK/<model>/ours.json and torch.json, the matrix rates) into vision.json
// and prints the table, the targets last. Plain ESM, run by run.sh with the bundle's node:
//   node merge.mjs WORK OUT.json [COMMIT]
// A side that wrote nothing is an error naming the last lines of its log (WORK/<model>/<side>.log); the merge still
// writes what there is.
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { formatVision, mergeVision } from './vision-lib.mjs';

/** A JSON file, or null when it is missing, empty or cut short (a crash mid-write). */
export function readJsonOrNull(file) {
  if (!existsSync(file) || statSync(file).size === 0) return null;
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

/** The last lines of a log, one line of text (or null). */
function logTail(file, lines = 6) {
  if (!existsSync(file)) return null;
  return readFileSync(file, 'utf8').trim().split('\n').slice(-lines).join(' | ').slice(-1500) || null;
}

/** vision.json's object from a work folder (plan.json and what each side wrote). */
export function mergeWork(work, commit = '') {
  const plan = readJsonOrNull(join(work, 'plan.json'));
  if (!plan) throw new Error(`${join(work, 'plan.json')} is missing: the configs step did not run`);
  const ours = {};
  const torch = {};
  const logs = {};
  for (const m of plan.models) {
    ours[m] = readJsonOrNull(join(work, m, 'ours.json'));
    torch[m] = readJsonOrNull(join(work, m, 'torch.json'));
    for (const side of ['ours', 'torch']) logs[`${m}/${side}`] = logTail(join(work, m, `${side}.log`));
  }
  const skipped = existsSync(join(work, 'torch-skipped.txt')) ? readFileSync(join(work, 'torch-skipped.txt'), 'utf8').trim() || 'not run' : null;
  return mergeVision({ plan, ours, torch, torchSkipped: skipped, rateOurs: readJsonOrNull(join(work, 'rate-ours.json')), rateTorch: readJsonOrNull(join(work, 'rate-torch.json')), logs, commit });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [work, outFile, commit = ''] = process.argv.slice(2);
  if (!outFile) {
    console.error('usage: node merge.mjs WORK OUT.json [COMMIT]');
    process.exit(2);
  }
  const merged = mergeWork(work, commit);
  writeFileSync(outFile, JSON.stringify(merged, null, 2));
  console.log(`\n${formatVision(merged).join('\n')}`);
}
