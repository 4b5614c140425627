// Summary of bench/suites/decode-ab/run.sh: reads $OUT/decode-ab-<setting>.json and .rc, writes $OUT/decode_ab.json, prints the table.
//   run-node decode-ab-summary.mjs OUT COMMIT SETTING ...
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
const [out, commit, ...names] = process.argv.slice(2);
const f = (x, d) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : '-');
const rows = {};
for (const n of names) {
  const p = `${out}/decode-ab-${n}.json`;
  const r = existsSync(p) ? JSON.parse(readFileSync(p, 'utf8')) : {};
  const rcFile = `${out}/decode-ab-${n}.rc`;
  const rc = existsSync(rcFile) ? Number(readFileSync(rcFile, 'utf8')) : null; // null: not run (yet)
  rows[n] = { stepMs: r.stepMs ?? null, graphReplayMs: r.graphReplayMs ?? null, hostMs: r.meanHostMs ?? null, decodeTokS: r.stepMs ? 1000 / r.stepMs : null, settings: r.settings ?? null, errors: r.errors ?? [], rc };
}
writeFileSync(`${out}/decode_ab.json`, JSON.stringify({ commit: commit || null, settings: rows }, null, 2));
const baseName = rows.plain ? 'plain' : names[0]; // the speedups are against plain, else the first setting
const base = rows[baseName]?.stepMs;
console.log(`\ndecode-ab (commit ${commit || '?'}): bs-1 decode step per launch setting`);
console.log(`${'setting'.padEnd(Math.max(8, ...names.map((x) => x.length)))} ${'step ms'.padStart(8)} ${'replay ms'.padStart(10)} ${'host ms'.padStart(8)} ${'tok/s'.padStart(7)} ${`vs ${baseName}`.padStart(9)}  rc`);
for (const [n, r] of Object.entries(rows)) {
  console.log(`${n.padEnd(Math.max(8, ...names.map((x) => x.length)))} ${f(r.stepMs, 3).padStart(8)} ${f(r.graphReplayMs, 3).padStart(10)} ${f(r.hostMs, 3).padStart(8)} ${f(r.decodeTokS, 1).padStart(7)} ${(base && r.stepMs ? `${f(base / r.stepMs, 3)}x` : '-').padStart(9)}  ${r.rc}`);
}
