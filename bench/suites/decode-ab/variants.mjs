// The decode-ab suite's variants, in one table: name -> the settings its process runs under. Each variant starts from
// the shipped defaults (run.sh clears the caller's speed variables). Today a setting is a FASTKERNELS_* environment
// variable; when the per-knob variables give way to tuning files, this table (and envFor) is the one place to change:
// a variant then names a tuning file for FASTKERNELS_TUNING.
// Plain ESM, no dependencies (run with the bundle's node):
//   node variants.mjs env SETTING     the NAME=VALUE lines of a variant, or of a custom setting
//                                     NAME=V[,NAME=V...] (FASTKERNELS_ prefix optional); exit 2 on a bad one
//   node variants.mjs names           the variant names

// Every launch cut since run 12 off, and run 13's decode settings: the older variants are earlier runs' engines.
const CUTS_OFF = {
  FUSE_ROTARY_KV: '0',
  SAMPLER_GREEDY_SPLIT_ROWS: '0',
  FUSE_GLU: '0',
  FUSE_NORM: '0',
  GEMV_LATE_TRIGGER: 'off',
  DECODE_EARLY_KV: '0',
  DECODE_MIN_SPLIT_TOKENS: '128',
  DECODE_MMA_STAGES: '0',
  DECODE_CTAS_PER_SM: '32',
};
// run 11's engine: chained decode, PDL, the GEMV for every M-1 linear at FK_UNR 8 and 32 warps an SM
const GEMV = { CHAIN_DECODE: '1', PDL: '1', GEMV_MAX_ROWS: '1', GEMV_UNROLL: '8', GEMV_WARPS_PER_SM: '32', ...CUTS_OFF };

/** name -> { what it is, the settings (FASTKERNELS_ variables without the prefix) }. */
export const VARIANTS = {
  plain: { note: 'chained decode, PDL and the GEMV off (run 10 engine)', settings: { CHAIN_DECODE: '0', PDL: '0', GEMV_MAX_ROWS: '0', ...CUTS_OFF } },
  chain: { note: 'the next step launched before this one\'s tokens are read', settings: { CHAIN_DECODE: '1', PDL: '0', GEMV_MAX_ROWS: '0', ...CUTS_OFF } },
  pdl: { note: 'the spine kernels as programmatic dependent launches', settings: { CHAIN_DECODE: '0', PDL: '1', GEMV_MAX_ROWS: '0', ...CUTS_OFF } },
  both: { note: 'chain and pdl', settings: { CHAIN_DECODE: '1', PDL: '1', GEMV_MAX_ROWS: '0', ...CUTS_OFF } },
  gemv: { note: 'both, and the GEMV for every M-1 linear (run 11 defaults)', settings: GEMV },
  gemv48: { note: 'gemv at FK_UNR 4, 48 warps an SM (default since run 13)', settings: { ...GEMV, GEMV_UNROLL: '4', GEMV_WARPS_PER_SM: '48' } },
  rkv: { note: 'gemv, and rotary + the kv-cache write in one launch', settings: { ...GEMV, FUSE_ROTARY_KV: '1' } },
  greedy: { note: 'gemv, and the bs-1 greedy sampler split over CTAs', settings: { ...GEMV, SAMPLER_GREEDY_SPLIT_ROWS: '1' } },
  glu: { note: 'gemv, and gate_up + silu in one GEMV launch', settings: { ...GEMV, FUSE_GLU: '1' } },
  defaults: { note: 'no setting: the shipped defaults', settings: {} },
};

export class SettingError extends Error {}

/** The FASTKERNELS_NAME=VALUE assignments of a variant name or a custom NAME=V[,NAME=V...] setting. */
export function envFor(setting) {
  const v = VARIANTS[setting];
  if (v) return Object.entries(v.settings).map(([k, x]) => `FASTKERNELS_${k}=${x}`);
  if (!setting.includes('=')) {
    throw new SettingError(`unknown setting '${setting}' (${Object.keys(VARIANTS).join(', ')}, or NAME=VALUE[,NAME=VALUE])`);
  }
  return setting.split(',').map((a) => {
    const s = a.trim().replace(/^FASTKERNELS_/, '');
    if (!/^[A-Z0-9_]+=[A-Za-z0-9_.:-]*$/.test(s)) throw new SettingError(`setting '${setting}': '${a}' is not NAME=VALUE (a FASTKERNELS_* variable, prefix optional)`);
    return `FASTKERNELS_${s}`;
  });
}

const self = process.argv[1] ?? '';
if (/variants\.mjs$/.test(self)) {
  const [cmd, setting] = process.argv.slice(2);
  try {
    if (cmd === 'names') console.log(Object.keys(VARIANTS).join('\n'));
    else if (cmd === 'env' && setting !== undefined) for (const l of envFor(setting)) console.log(l);
    else throw new SettingError('usage: variants.mjs env SETTING | names');
  } catch (e) {
    console.error(`decode-ab: ${e instanceof Error ? e.message : String(e)}`);
    process.exitCode = 2;
  }
}
