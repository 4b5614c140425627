/**
 * The operational settings a process takes from its environment (library folders, the cache, Python, timeouts, ...),
 * each declared once here with its type, default and a one-line doc. They are read when used, never at import, so a
 * bad value surfaces as a UserError (exit 2) inside the command that needs it; `fastkernels doctor` lists them all.
 * Kernel launch choices are not settings: they live in the CUDA backend's tuning files (FASTKERNELS_TUNING, docs/tuning.md).
 */
import { z } from 'zod';
import { UserError } from './errors.js';

export type Environment = Readonly<Record<string, string | undefined>>;

interface Spec<T> {
  /** What a value must look like, for the error and for doctor. */
  readonly accepts: string;
  readonly doc: string;
  /** The value when unset (undefined: none; the consumer decides, as its doc says). */
  readonly fallback: T | undefined;
  /** How the default reads in doctor when it is not a plain value (e.g. a path built from $HOME). */
  readonly defaultText?: string;
  /** Set by FastKernels itself for its own child processes or test runs: doctor marks them and hides them by default. */
  readonly internal?: boolean;
  readonly schema: z.ZodType<T, string>;
}

const path = (doc: string, extra: Partial<Spec<string>> = {}): Spec<string> => ({ accepts: 'a path', doc, fallback: undefined, schema: z.string(), ...extra });
const text = (doc: string, extra: Partial<Spec<string>> = {}): Spec<string> => ({ accepts: 'any text', doc, fallback: undefined, schema: z.string(), ...extra });
const paths = (doc: string): Spec<string[]> => ({
  accepts: 'folders separated by ":"',
  doc,
  fallback: undefined,
  schema: z.string().transform((s) => s.split(':').filter(Boolean)),
});
const onOff = (doc: string, fallback: boolean | undefined, extra: Partial<Spec<boolean>> = {}): Spec<boolean> => ({
  accepts: '0 or 1',
  doc,
  fallback,
  schema: z.enum(['0', '1']).transform((v) => v === '1'),
  ...extra,
});
const whole = (doc: string, min: number, fallback: number | undefined, extra: Partial<Spec<number>> = {}): Spec<number> => ({
  accepts: `a whole number >= ${min}`,
  doc,
  fallback,
  schema: z.string().regex(/^\d+$/).transform(Number).pipe(z.number().int().min(min).max(Number.MAX_SAFE_INTEGER)),
  ...extra,
});

/** Every FASTKERNELS_* variable the packages read. */
export const SETTINGS = {
  FASTKERNELS_CACHE_DIR: path('compiled kernels (cubin/, triton/) are cached here', { defaultText: '$XDG_CACHE_HOME/fastkernels, else ~/.cache/fastkernels' }),
  FASTKERNELS_CUDA_LIB_DIRS: paths('search only these folders for libcuda, NVRTC and cuBLASLt'),
  FASTKERNELS_CUDA_INCLUDE_DIRS: paths('CUDA header folders for NVRTC, searched before CUDA_HOME and the usual places'),
  FASTKERNELS_NCCL_LIB_DIRS: paths('search only these folders for libnccl.so.2'),
  FASTKERNELS_CUDA_ADDON: path('the fastkernels_cuda.node addon to load (default: the package or bundle copy)'),
  FASTKERNELS_NCCL_ADDON: path('the fastkernels_nccl.node addon to load (default: the package or bundle copy)'),
  FASTKERNELS_PYTHON: path('the Python that compiles Triton kernels and runs PyTorch candidates (only it is tried)', { defaultText: 'the active venv, python3, the torch venv, python' }),
  FASTKERNELS_TRITON_TIMEOUT_MS: whole('time limit of one Triton compile, in ms', 1, 300_000),
  FASTKERNELS_NCCL_TIMEOUT_MS: whole('deadline of NCCL init and every collective wait, in ms', 1, 300_000),
  FASTKERNELS_NCCL_BLOCKING: onOff("0: initDistributed's communicators are non-blocking (slower, abortable mid-call)", true),
  FASTKERNELS_CHECK_INDICES: onOff('1: read back the device-side index checks of embedding, rotary and the KV write (a host sync)', false),
  FASTKERNELS_DEVICE: whole('the CUDA device of this rank (launched ranks get it from the launcher)', 0, undefined, { defaultText: 'LOCAL_RANK, else RANK, else 0' }),
  FASTKERNELS_TUNING: path('a tuning file laid over the device\'s (docs/tuning.md; `fastkernels tuning derive` writes one)', { defaultText: 'none: the device\'s file alone' }),
  FASTKERNELS_GPU: onOff('tests: 1 runs the GPU-tagged tests, 0 skips them', undefined, { defaultText: 'run them when /dev/nvidiactl exists' }),
  // set by FastKernels for its own processes and test runs
  FASTKERNELS_RDZV_TOKEN: text('the rendezvous token of `fastkernels launch` ranks', { internal: true }),
  FASTKERNELS_LOCAL_RANK: whole('the local rank the launcher gave this process', 0, undefined, { internal: true }),
  FASTKERNELS_LAUNCHED: onOff('1 on every rank `fastkernels launch` started', undefined, { internal: true }),
  FASTKERNELS_WORKER_ENTRY: path('the script a bench worker process starts (default: this CLI)', { internal: true }),
  FASTKERNELS_BENCH_ABLATE: text('bench: the ops the decode-profile suite makes launch nothing (its --ablate)', { internal: true }),
  FASTKERNELS_BENCH_GROUP_SEED: whole('the seed a tensor-parallel bench group shares', 0, undefined, { internal: true }),
  FASTKERNELS_BUNDLE: path('the GPU-host bundle folder the tests run from', { internal: true }),
  FASTKERNELS_CLI: path('the CLI launcher the tests start', { internal: true }),
  FASTKERNELS_EXPLOITS: path('the exploit candidate sets the GPU tests bench', { internal: true }),
  FASTKERNELS_TEST_FILTER: text('the GPU host test runner runs only tests whose name contains this', { internal: true }),
  FASTKERNELS_TEST_PYTHON: path('the Python the Triton tests use', { internal: true }),
  FASTKERNELS_UPDATE_SCHEMAS: onOff('tests: 1 rewrites the committed JSON schemas', false, { internal: true }),
  FASTKERNELS_UPDATE_FIXTURES: onOff('tests: 1 rewrites the committed demo fixtures', false, { internal: true }),
  FASTKERNELS_CHROMIUM: path('tests: the Chromium that renders the leaderboard page', { internal: true }),
  FASTKERNELS_WRITE_DOCS_PNG: onOff('tests: 1 also refreshes docs/leaderboard.png', false, { internal: true }),
} as const satisfies Record<string, Spec<unknown>>;

export type SettingName = keyof typeof SETTINGS;
type ValueOf<N extends SettingName> = (typeof SETTINGS)[N] extends Spec<infer T> ? T : never;
export type SettingValue<N extends SettingName> = (typeof SETTINGS)[N]['fallback'] extends undefined ? ValueOf<N> | undefined : ValueOf<N>;

function processEnv(): Environment {
  return typeof process !== 'undefined' ? process.env : {};
}

function rawOf(name: SettingName, env: Environment): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

/** The setting's value from `env` (default: this process's), or its default when unset or empty; a bad value throws. */
export function setting<N extends SettingName>(name: N, env: Environment = processEnv()): SettingValue<N> {
  const spec: Spec<unknown> = SETTINGS[name];
  const raw = rawOf(name, env);
  if (raw === undefined) return spec.fallback as SettingValue<N>;
  const parsed = spec.schema.safeParse(raw);
  if (parsed.success) return parsed.data as SettingValue<N>;
  const dflt = spec.fallback !== undefined ? `; unset it for the default (${formatValue(spec.fallback)})` : '; or unset it';
  throw new UserError(`expected ${spec.accepts}, got '${raw}'`, { field: name, fix: `set ${name} to ${spec.accepts}${dflt}` });
}

export interface SettingReport {
  readonly name: SettingName;
  /** The effective value as text ('' when unset with no default). */
  readonly value: string;
  readonly source: 'environment' | 'default';
  readonly doc: string;
  readonly accepts: string;
  readonly internal: boolean;
}

function formatValue(v: unknown): string {
  if (v === undefined) return '';
  if (typeof v === 'boolean') return v ? '1' : '0';
  if (Array.isArray(v)) return v.join(':');
  return String(v);
}

/** Every setting with its value and where it came from; validates each, so the first bad value throws. */
export function settingsReport(env: Environment = processEnv()): SettingReport[] {
  return (Object.keys(SETTINGS) as SettingName[]).map((name) => {
    const spec: Spec<unknown> = SETTINGS[name];
    const fromEnv = rawOf(name, env) !== undefined;
    const v = setting(name, env);
    const value = fromEnv || spec.defaultText === undefined ? formatValue(v) : spec.defaultText;
    return { name, value, source: fromEnv ? 'environment' : 'default', doc: spec.doc, accepts: spec.accepts, internal: spec.internal === true };
  });
}

/** FASTKERNELS_* variables in `env` that no setting declares (a typo, or a variable this version no longer reads). */
export function unknownSettings(env: Environment = processEnv()): string[] {
  return Object.keys(env).filter((k) => k.startsWith('FASTKERNELS_') && !(k in SETTINGS)).sort();
}
