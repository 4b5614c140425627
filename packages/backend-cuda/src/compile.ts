/** NVRTC option building and compile-error formatting (pure, unit-tested). */

/** Compute capabilities that have an architecture-specific ('a') target with the Hopper/Blackwell-only instructions. */
const ARCH_SPECIFIC = new Set([90, 100, 101, 103, 110, 120, 121]);

/** The real SASS target for a compute capability: sm_90a on 9.0 (wgmma, setmaxnreg need it), sm_89 on 8.9. */
export function archFor(major: number, minor: number): string {
  const cc = major * 10 + minor;
  return `sm_${cc}${ARCH_SPECIFIC.has(cc) ? 'a' : ''}`;
}

export function nvrtcOptions(arch: string, includeDirs: readonly string[], extra: readonly string[] = []): string[] {
  const opts = [`--gpu-architecture=${arch}`, '-std=c++17', '-default-device', '-lineinfo'];
  for (const d of includeDirs) opts.push(`-I${d}`);
  // A user option of the same kind replaces ours (e.g. an explicit -std=c++20 or --gpu-architecture).
  const kind = (o: string) => (o.startsWith('-std') ? '-std' : o.startsWith('--gpu-architecture') || o.startsWith('-arch') ? 'arch' : o);
  const userKinds = new Set(extra.map(kind));
  return [...opts.filter((o) => !userKinds.has(kind(o)) || o.startsWith('-I')), ...extra];
}

export interface CompileErrorLine {
  readonly line: number;
  readonly message: string;
}

/** `name(12): error: identifier "x" is undefined` -> { line: 12, message } for each error in the log. */
export function parseCompileLog(log: string, name: string): CompileErrorLine[] {
  const out: CompileErrorLine[] = [];
  const esc = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const re = new RegExp(`^${esc}\\((\\d+)\\): (?:catastrophic )?error[^:]*: (.*)$`, 'gm');
  for (let m = re.exec(log); m; m = re.exec(log)) out.push({ line: Number(m[1]), message: m[2]! });
  return out;
}

/** The compile log followed by the failing source line(s) with two lines of context. */
export function formatCompileError(name: string, source: string, log: string, status: string, includeNote = ''): string {
  const errors = parseCompileLog(log, name);
  const lines = source.split('\n');
  const parts = [`NVRTC failed to compile ${name} (${status}):`, log.trim()];
  for (const e of errors.slice(0, 3)) {
    const from = Math.max(1, e.line - 2);
    const to = Math.min(lines.length, e.line + 2);
    const width = String(to).length;
    parts.push(`at ${name}:${e.line}: ${e.message}`);
    for (let i = from; i <= to; i++) parts.push(`${i === e.line ? '>' : ' '} ${String(i).padStart(width)} | ${lines[i - 1] ?? ''}`);
  }
  if (includeNote) parts.push(includeNote);
  return parts.join('\n');
}

export class CudaCompileError extends Error {
  override name = 'CudaCompileError';
  constructor(
    message: string,
    readonly sourceName: string,
    readonly log: string,
    /** The first failing line (1-based), when the log names one. */
    readonly line: number | undefined,
  ) {
    super(message);
  }
}
