// The decode-ab suite's variants, in one table: name -> the tuning override its process runs under
// (FASTKERNELS_TUNING=<file>: a partial tuning file laid over the device's; docs/tuning.md). Each variant starts from
// the device's tuning file (run.sh clears the caller's FASTKERNELS_* settings).
// Plain ESM, no dependencies (run with the bundle's node):
//   node variants.mjs env SETTING FILE   writes the setting's override to FILE (when it has one) and prints the
//                                        environment it runs under (FASTKERNELS_TUNING=FILE, FASTKERNELS_BENCH_ABLATE=...)
//   node variants.mjs check SETTING      exit 2 with the reason when SETTING is not a variant or a custom setting
//   node variants.mjs names              the variant names
// A custom SETTING is section.key=value[,section.key=value...] (tuning keys, e.g. attention.decodeMmaMinSplitTokens=512)
// and/or BENCH_ABLATE=OP[:OP] (the ops that launch nothing: an upper bound on a fusion's gain).
import { writeFileSync } from 'node:fs';

const SECTIONS = ['launch', 'linear', 'norm', 'kvStore', 'rotary', 'attention', 'softmax', 'sampler', 'engine'];

// Every launch cut since run 12 off, and run 13's decode settings: the older variants are earlier runs' engines.
const CUTS_OFF = {
  linear: { gemvFuseGlu: false, gemvFuseNorm: false, gemvLateTrigger: 'off' },
  rotary: { fuseKvStore: false },
  sampler: { greedySplitMaxRows: 0 },
  attention: { decodeEarlyKv: false, decodeMmaMinSplitTokens: 128, decodeMmaStages: 0, decodeMmaCtasPerSm: 32 },
};
// run 11's engine: chained decode, PDL, the GEMV for every M-1 linear at FK_UNR 8 and 32 warps an SM
const GEMV = merge(CUTS_OFF, { engine: { chainDecode: true }, launch: { pdl: true }, linear: { gemvMaxRows: 1, gemvUnroll: 8, gemvStreamWarpsPerSm: 32 } });
const launches = (chainDecode, pdl) => merge(CUTS_OFF, { engine: { chainDecode }, launch: { pdl }, linear: { gemvMaxRows: 0 } });

/** name -> { what it is, its tuning override (sections of keys) }. */
export const VARIANTS = {
  plain: { note: 'chained decode, PDL and the GEMV off (run 10 engine)', tuning: launches(false, false) },
  chain: { note: "the next step launched before this one's tokens are read", tuning: launches(true, false) },
  pdl: { note: 'the spine kernels as programmatic dependent launches', tuning: launches(false, true) },
  both: { note: 'chain and pdl', tuning: launches(true, true) },
  gemv: { note: 'both, and the GEMV for every M-1 linear (run 11 defaults)', tuning: GEMV },
  gemv48: { note: 'gemv at FK_UNR 4, 48 warps an SM (default since run 13)', tuning: merge(GEMV, { linear: { gemvUnroll: 4, gemvStreamWarpsPerSm: 48 } }) },
  rkv: { note: 'gemv, and rotary + the kv-cache write in one launch', tuning: merge(GEMV, { rotary: { fuseKvStore: true } }) },
  greedy: { note: 'gemv, and the bs-1 greedy sampler split over CTAs', tuning: merge(GEMV, { sampler: { greedySplitMaxRows: 1 } }) },
  glu: { note: 'gemv, and gate_up + silu in one GEMV launch', tuning: merge(GEMV, { linear: { gemvFuseGlu: true } }) },
  defaults: { note: "no override: the device's tuning file", tuning: {} },
};

export class SettingError extends Error {}

function merge(a, b) {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = v && typeof v === 'object' ? { ...(a[k] ?? {}), ...v } : v;
  return out;
}

const valueOf = (raw) => (raw === 'true' ? true : raw === 'false' ? false : /^-?\d+(\.\d+)?$/.test(raw) ? Number(raw) : raw);

/** A setting's tuning override and the other variables its process gets. */
export function settingFor(setting) {
  const v = VARIANTS[setting];
  if (v) return { tuning: v.tuning, env: {} };
  if (!setting.includes('=')) {
    throw new SettingError(`unknown setting '${setting}' (${Object.keys(VARIANTS).join(', ')}, or section.key=value[,...] / BENCH_ABLATE=OP[:OP])`);
  }
  let tuning = {};
  const env = {};
  for (const part of setting.split(',').map((p) => p.trim())) {
    const m = /^([A-Za-z0-9_.]+)=([A-Za-z0-9_.:-]*)$/.exec(part);
    if (!m) throw new SettingError(`setting '${setting}': '${part}' is not NAME=VALUE`);
    const [, name, raw] = m;
    if (name === 'BENCH_ABLATE') {
      env.FASTKERNELS_BENCH_ABLATE = raw;
      continue;
    }
    const [section, key, ...rest] = name.split('.');
    if (!key || rest.length || !SECTIONS.includes(section)) {
      throw new SettingError(`setting '${setting}': '${name}' is not a tuning key (section.key with a section of ${SECTIONS.join(', ')}; docs/tuning.md lists the keys, e.g. attention.decodeMmaMinSplitTokens=512)`);
    }
    tuning = merge(tuning, { [section]: { [key]: valueOf(raw) } });
  }
  return { tuning, env };
}

/** Writes the override to `file` when there is one; returns the NAME=VALUE lines of the process's environment. */
export function envFor(setting, file) {
  const { tuning, env } = settingFor(setting);
  const lines = Object.entries(env).map(([k, x]) => `${k}=${x}`);
  if (Object.keys(tuning).length === 0) return lines;
  writeFileSync(file, `${JSON.stringify({ description: `decode-ab setting ${setting}`, ...tuning }, null, 2)}\n`);
  return [`FASTKERNELS_TUNING=${file}`, ...lines];
}

const self = process.argv[1] ?? '';
if (/variants\.mjs$/.test(self)) {
  const [cmd, setting, file] = process.argv.slice(2);
  try {
    if (cmd === 'names') console.log(Object.keys(VARIANTS).join('\n'));
    else if (cmd === 'check' && setting !== undefined) settingFor(setting);
    else if (cmd === 'env' && setting !== undefined && file !== undefined) for (const l of envFor(setting, file)) console.log(l);
    else throw new SettingError('usage: variants.mjs env SETTING FILE | check SETTING | names');
  } catch (e) {
    console.error(`decode-ab: ${e instanceof Error ? e.message : String(e)}`);
    process.exitCode = 2;
  }
}
