// Merges the embed suite's two sides into embed.json and prints the report (issue 35's targets last). Plain ESM, run
// by run.sh with the bundle's node:  node merge.mjs OURS.json HF.json OUT.json [COMMIT] [--serve SERVE.json]   (a
// missing side: a file that does not exist or is empty; the merge still writes what there is)
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { formatEmbed, mergeEmbed } from './embed-lib.mjs';

/** A side's JSON, or null when its run left nothing (crash, timeout before the first write). */
export function readSide(file) {
  if (!file || !existsSync(file) || statSync(file).size === 0) return null;
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  const k = args.indexOf('--serve');
  const serveFile = k >= 0 ? args.splice(k, 2)[1] : null;
  const [oursFile, hfFile, outFile, commit = ''] = args;
  if (!outFile) {
    console.error('usage: node merge.mjs OURS.json HF.json OUT.json [COMMIT] [--serve SERVE.json]');
    process.exit(2);
  }
  const merged = mergeEmbed(readSide(oursFile), readSide(hfFile), { commit, serve: readSide(serveFile) });
  writeFileSync(outFile, JSON.stringify(merged, null, 2));
  console.log(`\n${formatEmbed(merged).join('\n')}`);
}
