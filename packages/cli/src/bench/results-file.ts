import { closeSync, existsSync, fstatSync, fsyncSync, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs';
import {
  RESULTS_FORMAT,
  RESULTS_VERSION,
  ResultsHeaderSchema,
  ResultsTaskLineSchema,
  UserError,
  configDifferences,
  errorMessage,
  type ResultsHeader,
  type ResultsTaskLine,
} from '@fastkernels/core';

/**
 * `--results FILE.jsonl`: the header line, then one line per finished task, each written with one
 * write() and fsync()ed, so a run killed at any moment leaves whole lines (plus at most one cut line,
 * dropped on --resume).
 */
export interface ParsedResults {
  readonly header: ResultsHeader;
  readonly lines: ResultsTaskLine[];
  /** Byte length of the whole lines (a cut last line starts here). */
  readonly goodBytes: number;
  readonly cut: boolean;
}

export function readResultsFile(path: string, field: string): ParsedResults {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UserError(code === 'ENOENT' ? 'no such file' : `cannot read it (${code ?? errorMessage(e)})`, { file: path, field, fix: 'pass a results file written by `fastkernels bench --results FILE.jsonl`' });
  }
  const rawLines = text.split('\n');
  const cut = !text.endsWith('\n') && text.length > 0;
  const complete = cut ? rawLines.slice(0, -1) : rawLines.slice(0, -1);
  let goodBytes = 0;
  for (const l of complete) goodBytes += Buffer.byteLength(l) + 1;
  if (complete.length === 0) {
    throw new UserError(text.length ? 'holds no complete header line (cut short?)' : 'is empty', { file: path, field, fix: 'remove it and run again (nothing was recorded in it)' });
  }
  let head: unknown;
  try {
    head = JSON.parse(complete[0]!);
  } catch {
    throw new UserError('is not a fastkernels results file (line 1 is not JSON)', { file: path, field, fix: 'pass a file written by `fastkernels bench --results FILE.jsonl`' });
  }
  const h0 = head as { format?: unknown; version?: unknown };
  if (typeof head !== 'object' || head === null || h0.format !== RESULTS_FORMAT) {
    throw new UserError('is not a fastkernels results file (its first line has no "format": "fastkernels-bench-results")', { file: path, field, fix: 'pass a file written by `fastkernels bench --results FILE.jsonl`' });
  }
  if (h0.version !== RESULTS_VERSION) {
    throw new UserError(`was written in results format version ${String(h0.version)}; this CLI reads and writes version ${RESULTS_VERSION}`, {
      file: path, field, fix: 'start a new results file (or use the fastkernels version that wrote it)',
    });
  }
  const header = ResultsHeaderSchema.safeParse(head);
  if (!header.success) {
    const i = header.error.issues[0]!;
    throw new UserError(`line 1: the header is invalid (${i.path.join('.')}: ${i.message})`, { file: path, field, fix: 'start a new results file' });
  }
  const lines: ResultsTaskLine[] = [];
  for (let n = 1; n < complete.length; n++) {
    const raw = complete[n]!;
    if (!raw.trim()) continue;
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch {
      throw new UserError(`line ${n + 1} is not valid JSON (the file is corrupt)`, { file: path, field, fix: `remove line ${n + 1} (its task will be run again with --resume), or start a new results file` });
    }
    const p = ResultsTaskLineSchema.safeParse(json);
    if (!p.success) {
      const i = p.error.issues[0]!;
      throw new UserError(`line ${n + 1} is not a task result (${i.path.join('.')}: ${i.message})`, { file: path, field, fix: `remove line ${n + 1} (its task will be run again with --resume)` });
    }
    lines.push(p.data);
  }
  return { header: header.data, lines, goodBytes, cut };
}

export class ResultsFile {
  private constructor(
    readonly path: string,
    private fd: number,
  ) {}

  /**
   * Open for appending. New file: writes the header. Existing file: needs `resume` and the same
   * configuration; a cut last line is removed (`repairedBytes`: its length). Returns the tasks already done (first
   * line per task).
   */
  static open(path: string, header: ResultsHeader, resume: boolean): { file: ResultsFile; done: ResultsTaskLine[]; repairedBytes: number } {
    const exists = existsSync(path) && statSize(path) > 0;
    if (exists && !resume) {
      throw new UserError('already exists', { file: path, field: '--results', fix: 'pass --resume to continue that run (tasks already in it are skipped), or remove the file / pick another path' });
    }
    if (!exists) {
      let fd: number;
      try {
        fd = openSync(path, 'w');
      } catch (e) {
        throw new UserError(`cannot create it (${(e as NodeJS.ErrnoException).code ?? errorMessage(e)})`, { file: path, field: '--results', fix: 'pass a writable path' });
      }
      const f = new ResultsFile(path, fd);
      f.writeLine(header);
      return { file: f, done: [], repairedBytes: 0 };
    }
    const parsed = readResultsFile(path, '--resume');
    const diff = configDifferences(parsed.header.config, header.config);
    if (diff.length) {
      throw new UserError(`was written with another configuration: ${diff.join('; ')}`, { file: path, field: '--resume', fix: 'rerun with the flags that started it, or start a new --results file' });
    }
    const fd = openSync(path, 'r+');
    const repairedBytes = parsed.cut ? fstatSync(fd).size - parsed.goodBytes : 0;
    if (parsed.cut) ftruncateSync(fd, parsed.goodBytes);
    const seen = new Set<string>();
    const done = parsed.lines.filter((l) => (seen.has(l.task) ? false : (seen.add(l.task), true)));
    return { file: new ResultsFile(path, fd), done, repairedBytes };
  }

  append(line: ResultsTaskLine): void {
    this.writeLine(line);
  }

  close(): void {
    if (this.fd >= 0) closeSync(this.fd);
    this.fd = -1;
  }

  private writeLine(obj: unknown): void {
    const buf = Buffer.from(JSON.stringify(obj) + '\n');
    const size = fstatSync(this.fd).size;
    let off = 0;
    while (off < buf.byteLength) off += writeSync(this.fd, buf, off, buf.byteLength - off, size + off);
    fsyncSync(this.fd);
  }
}

function statSize(path: string): number {
  try {
    return readFileSync(path).byteLength;
  } catch {
    return 0;
  }
}
