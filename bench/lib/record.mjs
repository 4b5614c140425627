// Records one suite result (bench/run calls it after the suite): copies the file to <out>/<device>/<name> (the current
// result, replaced; a .jsonl phase log becomes { phases: [...] }) with a `recorded` field (suite, device, commit, date,
// args, exit status), and appends one line of headline figures to <out>/<device>/history.jsonl (append-only).
// Plain ESM, no dependencies: it runs with the bundle's node on the GPU host.
//   node record.mjs --suite S --device D --file F [--name N] --out DIR [--commit C] [--exit RC] [--args TEXT] [--date ISO]
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';

const num = (x, digits = 4) => (typeof x === 'number' && Number.isFinite(x) ? Number(x.toPrecision(digits)) : null);

/** Per suite: the figures worth one history line (the targets the suite prints last). Unknown suites record none. */
export const HEADLINES = {
  runtime: (r) => ({
    launchEagerUs: num(r.ratios?.launchEagerUs),
    launchGraphUs: num(r.ratios?.launchGraphUs),
    copyVsTorchMin: num(r.ratios?.copyMin),
    gemmVsTorchGeomean: num(r.ratios?.gemmGeomean),
  }),
  kernels: (r) => ({
    memMinFracCopyBw: num(r.summary?.memMinFracCopyBw),
    memGeomeanVsCompiled: num(r.summary?.memGeomeanVsCompiled),
    memMinVsCompiled: num(r.summary?.memMinVsCompiled),
    decodeFracCopyBw: num(r.summary?.decodeFracCopyBw),
    decodeVsBestTorch: num(r.summary?.decodeVsBestTorch),
    prefillVsBestSdpa: num(r.summary?.prefillVsBestSdpa),
    notOk: r.summary?.notOk?.length ?? null,
  }),
  parity: (r) => ({
    dtype: r.dtype ?? null,
    ...Object.fromEntries(Object.entries(r.models ?? {}).map(([m, v]) => [m, `${v.verdict ?? '?'} ${v.summary?.greedy_identical ?? ''}`.trim()])),
  }),
  e2e: (r) =>
    Object.fromEntries(
      (Array.isArray(r.summary) ? r.summary : []).flatMap((s) => [
        [`${s.run}TokS`, num(s.ours)],
        [`${s.run}VsHfSdpa`, num(s.ours_vs_hf_sdpa)],
      ]),
    ),
  serve: (r) => ({
    requests: r.settings?.numRequests ?? null,
    decodeBs1TokS: num(r.summary?.decodeBs1TokS),
    hostFractionBs64: num(r.summary?.hostFractionBs64),
    throughputOutputTokS: num(r.summary?.throughputOutputTokS),
    selfTestAgreement: num(r.summary?.selfTestAgreement),
    oursOverHf: num(r.hf?.oursOverHf),
  }),
  'decode-profile': (r) => ({
    stepMs: num(r.stepMs),
    kernelsPerStep: r.kernelsPerStep ?? null,
    gemmOfCopy: num(r.gemm?.ofCopy),
  }),
  'decode-ab': (r) => ({ stepMs: Object.fromEntries(Object.entries(r.settings ?? {}).map(([k, v]) => [k, num(v.stepMs)])) }),
  allreduce: (r) => ({
    busBwVsTorchMin: num(r.summary?.minRatio),
    busBwVsTorchGeomean: num(r.summary?.geomeanRatio),
    peakBusBwGBps: num(r.summary?.peakBusBwGBps?.ours),
  }),
  tp: (r) => ({
    tp2OverTp1Bs1: num(r.speedupTp2OverTp1?.bs1),
    tp2OverTp1Bs32: num(r.speedupTp2OverTp1?.bs32),
    checks: r.checks ?? null,
  }),
  verify: (r) => ({ phases: Object.fromEntries((r.phases ?? []).map((p) => [p.phase, p.verdict ?? p.status ?? null])) }),
  'verify-tp': (r) => ({ checks: r.checks ?? null }),
  ops: (r) => ({
    ewMinFracCopy: num(r.summary?.ewMinFracCopy),
    chainMinVsCompiled: num(r.summary?.chainMinVsCompiled),
    normMinVsEager: num(r.summary?.normMinVsEager),
    normMinFracCopy: num(r.summary?.normMinFracCopy),
    bmmMinVsTorch: num(r.summary?.bmmMinVsTorch),
    convGeomeanVsEager: num(r.summary?.convGeomeanVsEager),
    attnLlamaCausalVsDefault: num(r.summary?.attnLlamaCausalVsDefault),
    attnNonCausalMinVsBest: num(r.summary?.attnNonCausalMinVsBest),
    permuteMinFracCopy: num(r.summary?.permuteMinFracCopy),
    glaPrefillMinVsCompiled: num(r.summary?.glaPrefillMinVsCompiled),
    gdnPrefillMinVsFla: num(r.summary?.gdnPrefillMinVsFla),
    deltaDecodeMinFracStateFloor: num(r.summary?.deltaDecodeMinFracStateFloor),
    moeDecodeMinFracFloor: num(r.summary?.moeDecodeMinFracFloor),
    moePrefillMinFracMatrix: num(r.summary?.moePrefillMinFracMatrix),
    notOk: r.summary?.notOk?.length ?? null,
  }),
  embed: (r) => ({
    oursTokS: num(r.summary?.oursTokS),
    oursSeqS: num(r.summary?.oursSeqS),
    hfSdpaTokS: num(r.summary?.hfSdpaTokS),
    oursOverHfSdpa: num(r.summary?.oursOverHfSdpa),
    oursOverHfCompile: num(r.summary?.oursOverHfCompile),
    serveTokS: num(r.summary?.serveTokS),
    serveOverOffline: num(r.summary?.serveOverOffline),
  }),
  vision: (r) => ({
    ...Object.fromEntries(Object.entries(r.summary ?? {}).filter(([k]) => !['targetsPassed', 'oursMs'].includes(k)).map(([k, v]) => [k, num(v)])),
    oursMs: Object.fromEntries(Object.entries(r.summary?.oursMs ?? {}).map(([k, v]) => [k, num(v)])),
    targetsPassed: r.summary?.targetsPassed ?? null,
  }),
  attention: (r) => ({
    attnLlamaCausalVsDefault: num(r.summary?.attnLlamaCausalVsDefault),
    attnNonCausalMinVsBest: num(r.summary?.attnNonCausalMinVsBest),
    attnNonCausalHd128MinTflops: num(r.summary?.attnNonCausalHd128MinTflops),
  }),
};

/** The file's contents as one JSON object: a .jsonl (one object a line) becomes { phases: [...] }. */
export function readResult(file) {
  const text = readFileSync(file, 'utf8');
  if (!file.endsWith('.jsonl')) return JSON.parse(text);
  const phases = text.split('\n').filter((l) => l.trim()).map((l, i) => {
    try {
      return JSON.parse(l);
    } catch {
      throw new Error(`${file}: line ${i + 1} is not JSON`);
    }
  });
  return { phases };
}

/** True when a headline has figures and every one of them is null: the run measured nothing (e.g. no GPU). */
export function measuredNothing(headline) {
  const leaves = [];
  const walk = (v) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.values(v).forEach(walk) : leaves.push(v));
  walk(headline);
  return leaves.length > 0 && leaves.every((v) => v === null);
}

/**
 * Writes the current file and appends the history line; returns that line (an object), or null when the run measured
 * nothing (the current file, a real measurement, stays).
 */
export function record({ suite, device, file, name = basename(file), out, commit = '', exit = 0, args = '', date = new Date().toISOString() }) {
  const result = readResult(file);
  const headline = HEADLINES[suite] ? HEADLINES[suite](result) : {};
  if (measuredNothing(headline)) return null;
  const dir = join(out, device);
  mkdirSync(dir, { recursive: true });
  const recorded = { suite, device, commit: commit || result.commit || null, date, args: args || null, exit: Number(exit) };
  const current = name.endsWith('.jsonl') ? name.replace(/\.jsonl$/, '.json') : name;
  writeFileSync(join(dir, current), `${JSON.stringify({ recorded, ...result }, null, 2)}\n`);
  const line = { date, commit: recorded.commit, suite, file: current, ...(args ? { args } : {}), ...(Number(exit) ? { exit: Number(exit) } : {}), ...headline };
  appendFileSync(join(dir, 'history.jsonl'), `${JSON.stringify(line)}\n`);
  return line;
}

function parseArgs(argv) {
  const o = {};
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i];
    if (!k?.startsWith('--') || argv[i + 1] === undefined) throw new Error(`record.mjs: expected --name value pairs, got '${k}'`);
    o[k.slice(2)] = argv[i + 1];
  }
  for (const k of ['suite', 'device', 'file', 'out']) if (!o[k]) throw new Error(`record.mjs: --${k} is required`);
  return o;
}

const self = process.argv[1] ?? '';
if (/record\.mjs$/.test(self) && import.meta.url === pathToFileURL(self).href) {
  try {
    const o = parseArgs(process.argv.slice(2));
    const line = record(o);
    if (line) console.log(`bench/run: ${o.suite}: wrote ${join(o.out, o.device, line.file)}, appended a line to ${join(o.out, o.device, 'history.jsonl')}`);
    else console.error(`bench/run: ${o.suite}: ${o.file} has no figure (every headline value is null): nothing recorded`);
  } catch (e) {
    console.error(e instanceof Error ? e.message : String(e));
    process.exitCode = 2;
  }
}
