/**
 * An NVRTC (or nvcc: the same front end) compile log, mapped to a candidate error that names the candidate's own
 * file and line with the offending source line, instead of NVRTC's in-memory program name.
 */
import { UserError } from '@fastkernels/core';

export interface LogError {
  /** The file as the log names it (the program name or an include). */
  readonly file: string;
  readonly line: number;
  readonly message: string;
}

/** Every `file(line): [catastrophic] error[ #code-D]: message` line of a log, in order. */
export function logErrors(log: string): LogError[] {
  const out: LogError[] = [];
  for (const m of log.matchAll(/^(.+?)\((\d+)\): (?:catastrophic )?error[^:]*: (.*)$/gm)) out.push({ file: m[1]!, line: Number(m[2]), message: m[3]!.trim() });
  return out;
}

export interface CompileErrorSources {
  /** The name NVRTC compiled the program under (errors in it are errors in the .cu). */
  readonly programName: string;
  /** The .cu as messages name it. */
  readonly display: string;
  readonly source: string;
  /** Include name -> [display path, source] of the candidate's own headers. */
  readonly headers?: Readonly<Record<string, readonly [string, string]>>;
}

/** The UserError for a failed compile: `does not compile: <file>:<line>: <message>`, the line quoted, the rest counted. */
export function compileErrorToUserError(log: string, src: CompileErrorSources): UserError {
  const errors = logErrors(log);
  const first = errors[0];
  if (!first) {
    const head = log.trim().split('\n').slice(0, 6).join('\n  ');
    return new UserError(`does not compile (NVRTC gave no file:line):\n  ${head || '(empty log)'}`, {
      file: src.display,
      fix: 'check it offline with `nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -c FILE.cu`',
    });
  }
  const where = (e: LogError): [string, string | undefined] => {
    if (e.file === src.programName || e.file.endsWith(`/${src.programName}`)) return [src.display, src.source];
    const h = Object.entries(src.headers ?? {}).find(([name]) => e.file === name || e.file.endsWith(`/${name}`));
    return h ? [h[1][0], h[1][1]] : [e.file, undefined];
  };
  const [file, text] = where(first);
  const quoted = text?.split('\n')[first.line - 1];
  const more = errors.length > 1 ? `\n  (and ${errors.length - 1} more error${errors.length > 2 ? 's' : ''}: ${errors.slice(1, 4).map((e) => `${where(e)[0]}:${e.line}: ${e.message}`).join('; ')})` : '';
  return new UserError(`does not compile: ${file}:${first.line}: ${first.message}${quoted !== undefined ? `\n  > ${first.line} | ${quoted.trimEnd()}` : ''}${more}`, {
    file,
    fix: 'fix the error at that line (the kernel is compiled by NVRTC with -std=c++17 for the GPU\'s arch; `nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -c FILE.cu` checks it offline)',
  });
}
