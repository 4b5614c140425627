/** Errors of the Triton backend and their messages (pure, unit-tested). */

/** No Python, or no Triton in any Python found: the message says what to install or set. */
export class TritonUnavailableError extends Error {
  override name = 'TritonUnavailableError';
}

/** The compiled kernel needs more than the device has (shared memory above the opt-in limit, ...). */
export class TritonOutOfResourcesError extends Error {
  override name = 'TritonOutOfResourcesError';
}

/** One frame of a Triton compile error, in the submitted source. */
export interface TritonErrorFrame {
  /** File name shown to the user (the spec's `name`), or null when the frame is outside the submitted source. */
  readonly file?: string | null;
  readonly function?: string | null;
  /** 1-based line in the submitted source, when known. */
  readonly line?: number | null;
  readonly column?: number | null;
  /** The line as Triton numbers it (from the kernel's `def`). */
  readonly fn_line?: number | null;
  readonly text?: string | null;
  readonly message?: string | null;
}

/** The helper's error object. */
export interface HelperErrorJson {
  readonly kind: string;
  readonly message: string;
  readonly frames?: readonly TritonErrorFrame[];
  readonly detail?: string;
  /** The helper's stderr during the request (added by the client). */
  readonly stderr?: string;
}

/** A Triton compile failure: the kernel's source line(s), Triton's message, the kind of failure. */
export class TritonCompileError extends Error {
  override name = 'TritonCompileError';
  constructor(
    message: string,
    /** compile | source | ptxas | out_of_resources | request | internal | timeout | crash | spawn | shutdown */
    readonly kind: string,
    readonly sourceName: string,
    /** The failing line (1-based) in the submitted source, when known. */
    readonly line: number | undefined,
    readonly column: number | undefined,
    readonly frames: readonly TritonErrorFrame[],
    readonly detail?: string,
  ) {
    super(message);
  }
}

/** Source lines around `line` with a marker (and a caret under `column` when known). */
export function sourceExcerpt(source: string, line: number, column?: number | null, context = 2): string[] {
  const lines = source.split('\n');
  const from = Math.max(1, line - context);
  const to = Math.min(lines.length, line + context);
  const width = String(to).length;
  const out: string[] = [];
  for (let i = from; i <= to; i++) {
    out.push(`${i === line ? '>' : ' '} ${String(i).padStart(width)} | ${lines[i - 1] ?? ''}`);
    if (i === line && column && column > 0) out.push(`  ${' '.repeat(width)} | ${' '.repeat(column - 1)}^`);
  }
  return out;
}

const KIND_TITLE: Readonly<Record<string, string>> = {
  compile: 'Triton failed to compile',
  source: 'Python failed to run the source of',
  ptxas: 'ptxas failed on the PTX Triton generated for',
  out_of_resources: 'Triton ran out of resources compiling',
  request: 'the Triton compile request is invalid for',
  internal: 'the Triton helper failed on',
  timeout: 'the Triton helper timed out compiling',
  crash: 'the Triton helper crashed compiling',
  spawn: 'the Triton helper could not start for',
  shutdown: 'the Triton helper was shut down while compiling',
};

/**
 * The message of a TritonCompileError: a title, Triton's message, then the failing line of the submitted source
 * with context (the innermost frame that has a line), then the call sites that led there, then stderr when the
 * failure has no source location (MLIR/ptxas diagnostics).
 */
export function formatTritonError(fn: string, sourceName: string, source: string, e: HelperErrorJson): { message: string; line?: number; column?: number } {
  const frames = e.frames ?? [];
  const located = frames.filter((f) => typeof f.line === 'number' && f.line > 0);
  const primary = located[located.length - 1];
  const title = `${KIND_TITLE[e.kind] ?? `Triton error (${e.kind}) in`} ${fn} (${sourceName})`;
  const parts = [`${title}: ${e.message.trim()}`];
  if (primary) {
    const where = `${sourceName}:${primary.line}${primary.column ? `:${primary.column}` : ''}`;
    parts.push(`at ${where}${primary.function ? ` (in ${primary.function})` : ''}`);
    parts.push(...sourceExcerpt(source, primary.line!, primary.column));
    for (const f of located.slice(0, -1).reverse()) {
      parts.push(`called from ${sourceName}:${f.line}${f.column ? `:${f.column}` : ''}${f.function ? ` (in ${f.function})` : ''}: ${(f.text ?? '').trim()}`);
    }
  } else if (frames.length) {
    const f = frames[frames.length - 1]!;
    if (f.text) parts.push(`in Triton's own source (line ${f.fn_line ?? '?'} of ${f.function ?? 'a library function'}): ${f.text.trim()}`);
  }
  if (!primary && e.detail && e.detail.trim() !== e.message.trim()) parts.push(e.detail.trim());
  if (!primary && e.stderr && e.stderr.trim()) parts.push(`helper stderr (last lines):\n${tail(e.stderr, 30)}`);
  return { message: parts.join('\n'), line: primary?.line ?? undefined, column: primary?.column ?? undefined };
}

function tail(s: string, lines: number): string {
  return s.trimEnd().split('\n').slice(-lines).join('\n');
}

export function toCompileError(fn: string, sourceName: string, source: string, e: HelperErrorJson): TritonCompileError {
  const f = formatTritonError(fn, sourceName, source, e);
  return new TritonCompileError(f.message, e.kind, sourceName, f.line, f.column, e.frames ?? [], e.detail);
}
