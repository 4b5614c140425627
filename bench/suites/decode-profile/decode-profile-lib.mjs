#!/usr/bin/env node
// Post-processing of bench/suites/decode-profile/run.sh (issue 7, bs-1 decode: where a step's time goes). Plain ESM, no
// dependencies: decode_profile.mjs imports it (esbuild inlines it into the bundled driver) and the shell
// script runs it directly with the bundle's node (tools/gpu-host-bundle.mjs copies it to dist/gpu-host/bench/suites/decode-profile/):
//   node decode-profile-lib.mjs post --csv NCU.csv --run RUN.json [--ncu-run RUN2.json] --config config.json
//        --steps N --out decode_profile.json [--commit C] [--ncu-error TEXT] [--copy-gbs 4230]
// Pure functions (tested by test/decode-profile.test.ts):
//   parseCsv / parseNcuCsv   ncu `--csv --page raw` text -> one row per kernel launch, in launch order (ID)
//   findPeriod               K = kernels per decode step: the period of the name sequence at the end of the list
//   kernelGroup / isGemmName our kernels (fk_*) by name, cuBLASLt's under one 'GEMM (cuBLASLt)' bucket
//   aggregateSteps           per group: count and µs per step, share of the step
//   llamaGemmWeights         the weight bytes each bs-1 GEMM reads (a Llama config.json)
//   analyzeDecodeProfile     all of it -> the decode_profile.json object
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

export const GEMM_GROUP = 'GEMM (cuBLASLt)';
/** The H200 copy figure (GB/s) the GEMMs' achieved bandwidth is compared with (docs; bench/runtime.mjs measures it). */
export const DEFAULT_COPY_GBS = 4230;

/** RFC-4180-ish CSV: quoted fields with "" escapes, commas and newlines inside quotes. */
export function parseCsv(text) {
  const rows = [];
  let row = [];
  let f = '';
  let q = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (q) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          f += '"';
          i++;
        } else q = false;
      } else f += c;
    } else if (c === '"') q = true;
    else if (c === ',') {
      row.push(f);
      f = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(f);
      rows.push(row);
      row = [];
      f = '';
    } else f += c;
  }
  if (f !== '' || row.length) {
    row.push(f);
    rows.push(row);
  }
  return rows;
}

const UNIT_TO_US = { nsecond: 1e-3, ns: 1e-3, usecond: 1, us: 1, msecond: 1e3, ms: 1e3, second: 1e6, s: 1e6 };

/** A number as ncu prints it ("1,234.5", "12.0"); NaN when it is none. */
export function ncuNumber(s) {
  const t = String(s ?? '').trim().replace(/,/g, '');
  return t === '' || t === 'n/a' ? NaN : Number(t);
}

/**
 * ncu `--csv --page raw` output (a log with ==PROF== lines around it is fine) -> [{ id, name, us }] in launch order.
 * The header row holds "ID", "Kernel Name" and the metric column; the row after it, when its ID is empty, holds the
 * units (nsecond with --print-units base; usecond/msecond when ncu scales).
 */
export function parseNcuCsv(text, metric = 'gpu__time_duration.sum') {
  const lines = String(text).split(/\r?\n/).filter((l) => l.startsWith('"'));
  const rows = parseCsv(lines.join('\n'));
  const h = rows.findIndex((r) => r.includes('Kernel Name') && r.includes(metric));
  if (h < 0) throw new Error(`no ncu CSV header with "Kernel Name" and "${metric}" (${lines.length} CSV lines)`);
  const head = rows[h];
  const iId = head.indexOf('ID');
  const iName = head.indexOf('Kernel Name');
  const iM = head.indexOf(metric);
  let scale = 1e-3; // nanoseconds: ncu's base unit for gpu__time_duration
  let start = h + 1;
  const unitRow = rows[start];
  if (unitRow && (iId < 0 || String(unitRow[iId]).trim() === '')) {
    const u = String(unitRow[iM] ?? '').trim();
    if (u) {
      if (!(u in UNIT_TO_US)) throw new Error(`unknown unit "${u}" for ${metric}`);
      scale = UNIT_TO_US[u];
    }
    start++;
  }
  const out = [];
  for (let i = start; i < rows.length; i++) {
    const r = rows[i];
    if (r.length <= Math.max(iName, iM)) continue;
    if (r.includes('Kernel Name') && r.includes(metric)) continue; // a repeated header (several processes)
    const v = ncuNumber(r[iM]);
    if (!Number.isFinite(v)) continue;
    const id = iId >= 0 ? ncuNumber(r[iId]) : out.length;
    out.push({ id: Number.isFinite(id) ? id : out.length, name: r[iName], us: v * scale });
  }
  // launch order; a stable sort keeps file order for equal ids
  return out.map((k, i) => ({ k, i })).sort((a, b) => a.k.id - b.k.id || a.i - b.i).map((x) => x.k);
}

/**
 * Kernels per step: the smallest K for which the last `steps` blocks of K names are all equal (names[-K:] equals the
 * K before it, `steps` times). Tries `steps` repetitions, then fewer (down to `minReps`, e.g. when the first replay
 * differs), so a partial profile still says something. Returns { K, reps } or null.
 */
export function findPeriod(names, steps, { minReps = 2, maxK = Infinity } = {}) {
  const n = names.length;
  for (let reps = steps; reps >= Math.max(2, minReps); reps--) {
    const top = Math.min(Math.floor(n / reps), maxK);
    for (let K = 1; K <= top; K++) {
      let ok = true;
      for (let j = n - K * (reps - 1) - 1; j >= n - K * reps && ok; j--) {
        // names[j] must equal names[j + K], ..., i.e. every block equals the last one
        for (let r = 1; r < reps; r++) {
          if (names[j] !== names[j + r * K]) {
            ok = false;
            break;
          }
        }
      }
      if (ok) return { K, reps };
    }
  }
  return null;
}

/** Short kernel name: no "void ", no parameter list (demangled names carry one). */
export function shortName(name) {
  let s = String(name).trim().replace(/^void\s+/, '');
  let depth = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '<') depth++;
    else if (c === '>') depth--;
    else if (c === '(' && depth === 0 && i > 0) {
      s = s.slice(0, i);
      break;
    }
  }
  return s;
}

/** Whether a kernel is a GEMM/GEMV: not one of ours (fk_*), or named like one (cuBLASLt, CUTLASS, xmma, split-K). */
export function isGemmName(name) {
  const s = shortName(name);
  return !s.startsWith('fk_') || /gemm|gemv|splitk/i.test(s);
}

/** The bucket a kernel counts in: ours by name, every cuBLASLt kernel in GEMM_GROUP. */
export function kernelGroup(name) {
  const s = shortName(name);
  return s.startsWith('fk_') ? s : GEMM_GROUP;
}

/**
 * Per-group totals over the last `reps` steps of K kernels each: count per step, µs per step, share of the kernel
 * sum, and the share of `stepMs` when given. `kernels`: [{ name, us }] in launch order. Sorted by time, largest first.
 */
export function aggregateSteps(kernels, K, reps, { stepMs = null } = {}) {
  const tail = kernels.slice(kernels.length - K * reps);
  const groups = new Map();
  let sumUs = 0;
  for (const k of tail) {
    const g = kernelGroup(k.name);
    let e = groups.get(g);
    if (!e) groups.set(g, (e = { name: g, gemm: isGemmName(k.name), count: 0, us: 0, variants: new Map() }));
    e.count++;
    e.us += k.us;
    const v = shortName(k.name);
    const ve = e.variants.get(v) ?? { name: v, count: 0, us: 0 };
    ve.count++;
    ve.us += k.us;
    e.variants.set(v, ve);
    sumUs += k.us;
  }
  const perStepSum = sumUs / reps;
  const rows = [...groups.values()].map((e) => {
    const usPerStep = e.us / reps;
    const row = {
      name: e.name,
      gemm: e.gemm,
      countPerStep: e.count / reps,
      usPerStep,
      usPerLaunch: e.us / e.count,
      shareOfKernels: perStepSum > 0 ? usPerStep / perStepSum : 0,
      shareOfStep: stepMs ? usPerStep / (stepMs * 1000) : null,
    };
    if (e.name === GEMM_GROUP || e.variants.size > 1) {
      row.variants = [...e.variants.values()].map((v) => ({ name: v.name, countPerStep: v.count / reps, usPerStep: v.us / reps })).sort((a, b) => b.usPerStep - a.usPerStep);
    }
    return row;
  });
  rows.sort((a, b) => b.usPerStep - a.usPerStep);
  return { perKernel: rows, kernelSumUs: perStepSum };
}

/**
 * The weights each bs-1 decode GEMM reads, from a HF Llama config.json (bf16 unless torch_dtype says otherwise):
 * per layer qkv [H, (nH + 2 nKV) d], o [nH d, H], gate_up [H, 2 I], down [I, H]; then lm_head [H, V].
 */
export function llamaGemmWeights(cfg, itemsize = cfg.torch_dtype === 'float32' ? 4 : 2) {
  const H = cfg.hidden_size;
  const I = cfg.intermediate_size;
  const nH = cfg.num_attention_heads;
  const nKV = cfg.num_key_value_heads ?? nH;
  const d = cfg.head_dim ?? H / nH;
  const L = cfg.num_hidden_layers;
  const V = cfg.vocab_size;
  const layerRoles = [
    { role: 'qkv', k: H, n: (nH + 2 * nKV) * d },
    { role: 'o', k: nH * d, n: H },
    { role: 'gate_up', k: H, n: 2 * I },
    { role: 'down', k: I, n: H },
  ].map((r) => ({ ...r, bytes: r.k * r.n * itemsize }));
  const lmHead = { role: 'lm_head', k: H, n: V, bytes: H * V * itemsize };
  const perLayer = layerRoles.reduce((a, r) => a + r.bytes, 0);
  return { layers: L, itemsize, layerRoles, lmHead, perLayerBytes: perLayer, totalBytes: L * perLayer + lmHead.bytes };
}

/**
 * GEMM launches of one step by role, when their count is layers x 4 + 1 (qkv, o, gate_up, down per layer, then the
 * LM head): µs per step and achieved GB/s per role. Null when the count differs (e.g. split-K reduce kernels).
 */
export function gemmRoles(stepKernels, weights) {
  const g = stepKernels.filter((k) => isGemmName(k.name));
  const per = weights.layerRoles.length;
  if (g.length !== weights.layers * per + 1) return null;
  const roles = [...weights.layerRoles.map((r) => ({ ...r, count: weights.layers })), { ...weights.lmHead, count: 1 }].map((r) => ({ role: r.role, k: r.k, n: r.n, count: r.count, bytesPerStep: r.bytes * r.count, us: 0, kernels: new Set() }));
  g.forEach((k, i) => {
    const r = i === g.length - 1 ? roles[roles.length - 1] : roles[i % per];
    r.us += k.us;
    r.kernels.add(shortName(k.name));
  });
  return roles.map((r) => ({ role: r.role, shape: `${r.k}x${r.n}`, count: r.count, usPerStep: r.us, bytesPerStep: r.bytesPerStep, achievedGBs: r.us > 0 ? r.bytesPerStep / (r.us * 1e3) : null, kernels: [...r.kernels] }));
}

/**
 * Everything decode_profile.json holds besides the run facts. `kernels`: parseNcuCsv's rows; `steps`: the decode
 * steps profiled (the last graph replays); `stepMs`: the measured mean step time without ncu; `graphReplayMs`: the
 * event-timed replay of the captured bs-1 graph alone (optional); `config`: the model's config.json.
 */
export function analyzeDecodeProfile({ kernels, steps, stepMs = null, graphReplayMs = null, config = null, copyGBs = DEFAULT_COPY_GBS }) {
  const names = kernels.map((k) => k.name);
  const period = findPeriod(names, steps);
  if (!period) return { error: `no repeating kernel sequence at the end of ${kernels.length} launches (expected ${steps} identical decode steps)`, launches: kernels.length };
  const { K, reps } = period;
  const { perKernel, kernelSumUs } = aggregateSteps(kernels, K, reps, { stepMs });
  const kernelSumMs = kernelSumUs / 1000;
  const out = {
    launches: kernels.length,
    kernelsPerStep: K,
    stepsMatched: reps,
    stepsExpected: steps,
    kernelSumMs,
    stepMs,
    gapMs: stepMs !== null ? stepMs - kernelSumMs : null,
    gapPerKernelUs: stepMs !== null ? ((stepMs - kernelSumMs) * 1000) / K : null,
    graphReplayMs,
    // the replay of the graph alone (device time) minus the kernels: gaps between graph nodes; the step minus the
    // replay: host work on the step's critical path (staging copies, launch, the token read-back)
    graphGapMs: graphReplayMs !== null ? graphReplayMs - kernelSumMs : null,
    hostGapMs: stepMs !== null && graphReplayMs !== null ? stepMs - graphReplayMs : null,
    perKernel,
  };
  const gemm = perKernel.filter((r) => r.gemm);
  const gemmUs = gemm.reduce((a, r) => a + r.usPerStep, 0);
  if (config) {
    const w = llamaGemmWeights(config);
    const lastStep = kernels.slice(kernels.length - K);
    out.gemm = {
      usPerStep: gemmUs,
      launchesPerStep: gemm.reduce((a, r) => a + r.countPerStep, 0),
      weightBytes: w.totalBytes,
      achievedGBs: gemmUs > 0 ? w.totalBytes / (gemmUs * 1e3) : null,
      copyGBs,
      ofCopy: gemmUs > 0 && copyGBs ? w.totalBytes / (gemmUs * 1e3) / copyGBs : null,
      floorMs: copyGBs ? w.totalBytes / (copyGBs * 1e6) : null,
      roles: gemmRoles(lastStep, w),
    };
    out.gemmGBs = out.gemm.achievedGBs;
  } else out.gemmGBs = null;
  return out;
}

const f = (x, d = 1) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(d) : '-');

/** The short table suites/decode-profile/run.sh prints last. */
export function formatTable(r) {
  const L = [];
  L.push(`decode-profile (${r.gpu ?? '?'}, commit ${r.commit ?? '?'}${r.pdl ? ', PDL on' : ''}${r.chainDecode ? ', chained decode' : ''}): bs-1 step ${f(r.stepMs, 3)} ms` + (r.graphReplayMs !== null && r.graphReplayMs !== undefined ? ` (graph replay alone ${f(r.graphReplayMs, 3)} ms)` : ''));
  if (r.error) {
    L.push(`no kernel breakdown: ${r.error}`);
    return L.join('\n');
  }
  L.push(`kernels per step ${r.kernelsPerStep} (${r.stepsMatched}/${r.stepsExpected} steps matched); kernel sum ${f(r.kernelSumMs, 3)} ms; gap ${f(r.gapMs, 3)} ms (${f(r.gapPerKernelUs, 2)} us/kernel)` +
    (r.graphGapMs !== null && r.graphGapMs !== undefined ? `; between graph nodes ${f(r.graphGapMs, 3)} ms, host ${f(r.hostGapMs, 3)} ms` : ''));
  L.push(`${'kernel'.padEnd(34)} ${'n/step'.padStart(7)} ${'us/step'.padStart(9)} ${'us/launch'.padStart(9)} ${'%step'.padStart(6)}`);
  for (const k of r.perKernel) {
    L.push(`${k.name.slice(0, 34).padEnd(34)} ${f(k.countPerStep, 0).padStart(7)} ${f(k.usPerStep, 1).padStart(9)} ${f(k.usPerLaunch, 2).padStart(9)} ${f(k.shareOfStep === null ? null : 100 * k.shareOfStep, 1).padStart(6)}`);
  }
  L.push(`${'gap (step - kernel sum)'.padEnd(34)} ${''.padStart(7)} ${f(r.gapMs === null ? null : r.gapMs * 1000, 1).padStart(9)} ${''.padStart(9)} ${f(r.gapMs === null || !r.stepMs ? null : (100 * r.gapMs) / r.stepMs, 1).padStart(6)}`);
  if (r.gemm) {
    L.push(`GEMMs: ${f(r.gemm.usPerStep / 1000, 3)} ms/step for ${f(r.gemm.weightBytes / 1e9, 2)} GB of weights = ${f(r.gemm.achievedGBs, 0)} GB/s (${f(100 * (r.gemm.ofCopy ?? NaN), 1)}% of ${f(r.gemm.copyGBs, 0)} GB/s copy; floor ${f(r.gemm.floorMs, 3)} ms)`);
    if (r.gemm.roles) L.push(`  by role: ${r.gemm.roles.map((x) => `${x.role} ${f(x.usPerStep, 0)} us ${f(x.achievedGBs, 0)} GB/s`).join(', ')}`);
  }
  return L.join('\n');
}

// ------------------------------------------------------------------------------------------------- CLI: post

function cli(argv) {
  const opt = (name, def) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : def);
  if (argv[0] !== 'post') {
    console.error('usage: decode-profile-lib.mjs post --csv NCU.csv --run RUN.json --config config.json --steps N --out OUT.json [--ncu-run RUN2.json] [--commit C] [--ncu-error TEXT] [--copy-gbs GBS]');
    return 2;
  }
  const readJson = (p) => {
    try {
      return p ? JSON.parse(readFileSync(p, 'utf8')) : null;
    } catch {
      return null;
    }
  };
  const run = readJson(opt('--run'));
  const ncuRun = readJson(opt('--ncu-run'));
  const config = readJson(opt('--config'));
  const steps = Number(opt('--steps', 8));
  const copyGBs = Number(opt('--copy-gbs', run?.copyGBs ?? DEFAULT_COPY_GBS));
  const result = {
    commit: opt('--commit', '') || null,
    gpu: run?.device ?? ncuRun?.device ?? null,
    stepMs: run?.stepMs ?? null,
    // programmatic dependent launches in the decode graphs (tuning launch.pdl) for the timed run; null from runs that
    // did not record it
    pdl: run?.settings?.tuning?.launch?.pdl ?? run?.settings?.pdl ?? null, // top-level in runs before 16
    chainDecode: run?.settings?.chainDecode ?? null,
    meanHostMs: run?.meanHostMs ?? null,
    graphReplayMs: run?.graphReplayMs ?? null,
    decodeSteps: run?.decodeSteps ?? null,
    graphSteps: run?.graphSteps ?? null,
    copyGBsMeasured: run?.copyGBs ?? null,
    ncuStepMs: ncuRun?.stepMs ?? null, // under ncu (serialised, replayed): not a timing, only that it ran
    profiledSteps: steps,
    ncu: { flags: opt('--ncu-flags', null), error: opt('--ncu-error', '') || null },
    notes: 'ncu serialises and replays every kernel: only per-kernel durations are trusted, not overlap; gapMs = stepMs (engine wall time per decode step, no ncu) - the sum of one step\'s kernel durations under ncu',
  };
  let ok = result.stepMs !== null;
  const csvPath = opt('--csv');
  let analysis = null;
  if (result.ncu.error) ok = false;
  else {
    try {
      const kernels = parseNcuCsv(readFileSync(csvPath, 'utf8'));
      analysis = analyzeDecodeProfile({ kernels, steps, stepMs: result.stepMs, graphReplayMs: result.graphReplayMs, config, copyGBs });
      if (analysis.error) ok = false;
    } catch (e) {
      result.ncu.error = `could not read the ncu CSV ${csvPath}: ${e?.message ?? e}`;
      ok = false;
    }
  }
  const full = { ...result, ...(analysis ?? { error: result.ncu.error ?? 'no ncu data' }) };
  if (analysis?.error) full.error = analysis.error;
  writeFileSync(opt('--out'), JSON.stringify(full, null, 2) + '\n');
  console.log(formatTable(full));
  return ok ? 0 : 1;
}

// Only when this file itself is the script (not when esbuild inlined it into the bundled driver).
const self = process.argv[1] ?? '';
if (/decode-profile-lib\.mjs$/.test(self) && import.meta.url === pathToFileURL(self).href) process.exitCode = cli(process.argv.slice(2));
