/**
 * The Node end of the PyTorch candidate worker (python/fk_torch_worker.py): one Python process per candidate file.
 * Startup is asynchronous (spawn, wait for the worker's one JSON line on stdout: ready, or why not); after it every
 * request is synchronous, because the harness calls forward() synchronously: length-prefixed JSON frames over two
 * FIFOs with blocking reads (no helper thread, which the integrity guard would count). The worker's death shows up
 * as end-of-file on the response FIFO; its stderr goes to a file read back for the error. A worker that hangs blocks
 * the bench worker, whose stall watchdog kills it; the Python process dies with it (PR_SET_PDEATHSIG).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, constants, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorMessage } from '@fastkernels/core';
import { TORCH_WORKER_SOURCE } from './worker-source.generated.js';

/** The worker's first line: ready with the class's signatures, or why it cannot serve. */
export interface WorkerHello {
  readonly ready: boolean;
  readonly protocol?: number;
  readonly python?: string;
  readonly python_version?: string;
  readonly torch?: string;
  readonly cuda?: boolean;
  readonly pid?: number;
  /** The class's line in the candidate file. */
  readonly line?: number | null;
  readonly init?: PySignature | null;
  readonly forward?: PySignature | null;
  /** When not ready: no_torch, import, no_class, hack. */
  readonly kind?: string;
  readonly message?: string;
  readonly error?: WorkerErrorBody;
}

export interface PySignature {
  readonly names: readonly string[];
  readonly required: number;
  readonly varargs: boolean;
}

export interface WorkerErrorBody {
  /** candidate, hack, request, fatal, internal. */
  readonly kind: string;
  readonly type?: string | null;
  readonly message: string;
  readonly file?: string | null;
  readonly line?: number | null;
  readonly traceback?: string;
}

/** A failed request: the worker's structured error, or its death. */
export class TorchWorkerError extends Error {
  override readonly name = 'TorchWorkerError';
  constructor(
    readonly body: WorkerErrorBody,
    readonly died = false,
  ) {
    super(`${body.file ? `${body.file}${body.line ? `:${body.line}` : ''}: ` : ''}${body.message}`);
  }
}

/** The worker script on disk (written once per content hash). */
export function torchWorkerScript(): string {
  const name = `fk_torch_worker-${createHash('sha256').update(TORCH_WORKER_SOURCE).digest('hex').slice(0, 12)}.py`;
  const dir = join(tmpdir(), 'fastkernels-torch');
  const path = join(dir, name);
  if (existsSync(path)) return path;
  mkdirSync(dir, { recursive: true });
  const tmp = join(dir, `.${name}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  writeFileSync(tmp, TORCH_WORKER_SOURCE);
  renameSync(tmp, path);
  return path;
}

export interface StartOptions {
  readonly python: string;
  readonly file: string;
  /** The candidate as messages name it. */
  readonly display: string;
  readonly className: string;
  /** Milliseconds to wait for the worker's first line (imports may compile extensions). Default 600 s. */
  readonly readyTimeoutMs?: number;
  readonly env?: NodeJS.ProcessEnv;
}

const live = new Set<TorchWorkerProcess>();
let exitHook = false;

export class TorchWorkerProcess {
  private seq = 0;
  private dead: string | undefined;
  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    private readonly wfd: number,
    private readonly rfd: number,
    readonly hello: WorkerHello,
  ) {
    live.add(this);
  }

  /** Start the worker for one candidate file; resolves with its hello (ready or not: the caller decides). */
  static async start(o: StartOptions): Promise<{ worker?: TorchWorkerProcess; hello: WorkerHello; stderr: string }> {
    if (!exitHook) {
      exitHook = true;
      process.once('exit', () => {
        for (const w of live) w.close();
      });
    }
    const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'fk-torch-'));
    const errPath = join(dir, 'stderr.log');
    const errFd = openSync(errPath, 'w');
    let child: ChildProcess;
    try {
      child = spawn(o.python, ['-u', torchWorkerScript(), dir, o.file, o.display, o.className], {
        stdio: ['ignore', 'pipe', errFd],
        env: { ...(o.env ?? process.env), PYTHONDONTWRITEBYTECODE: '1', PYTHONUNBUFFERED: '1' },
      });
    } finally {
      closeSync(errFd);
    }
    const stderr = () => tail(errPath);
    const line = await new Promise<string | Error>((resolve) => {
      let out = '';
      const timer = setTimeout(() => resolve(new Error(`no answer within ${(o.readyTimeoutMs ?? 600_000) / 1000} s`)), o.readyTimeoutMs ?? 600_000);
      const done = (v: string | Error) => {
        clearTimeout(timer);
        resolve(v);
      };
      child.on('error', (e) => done(e));
      child.stdout!.setEncoding('utf8');
      child.stdout!.on('data', (d: string) => {
        out += d;
        const nl = out.indexOf('\n');
        if (nl >= 0) done(out.slice(0, nl));
      });
      child.on('exit', (code, signal) => done(out.includes('\n') ? out.slice(0, out.indexOf('\n')) : new Error(signal ? `exited (signal ${signal})` : `exited with code ${code}`)));
    });
    const fail = (hello: WorkerHello) => {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      return { hello, stderr: stderr() };
    };
    if (line instanceof Error) {
      const s = stderr();
      return fail({ ready: false, kind: 'start', message: `${(line as NodeJS.ErrnoException).code === 'ENOENT' ? `${o.python}: not found` : line.message}${s ? `: ${lastLines(s, 6)}` : ''}` });
    }
    let hello: WorkerHello;
    try {
      hello = JSON.parse(line) as WorkerHello;
    } catch {
      return fail({ ready: false, kind: 'start', message: `the worker's first line is not JSON: ${line.slice(0, 200)}` });
    }
    if (!hello.ready) return fail(hello);
    // The worker opens req for reading, then resp for writing; opening in the same order cannot deadlock.
    const wfd = openSync(join(dir, 'req'), constants.O_WRONLY);
    const rfd = openSync(join(dir, 'resp'), constants.O_RDONLY);
    child.stdout!.destroy();
    child.unref();
    return { worker: new TorchWorkerProcess(child, dir, wfd, rfd, hello), hello, stderr: '' };
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Why the worker cannot serve any more, if it cannot. */
  get deadReason(): string | undefined {
    return this.dead;
  }

  /** One request, answered synchronously. Throws TorchWorkerError (the worker's error, or its death). */
  request<T = Record<string, unknown>>(op: string, body: Record<string, unknown> = {}): T {
    if (this.dead) throw new TorchWorkerError({ kind: 'fatal', message: this.dead }, true);
    const seq = ++this.seq;
    const data = Buffer.from(JSON.stringify({ ...body, seq, op }), 'utf8');
    const head = Buffer.alloc(4);
    head.writeUInt32LE(data.byteLength, 0);
    try {
      writeAll(this.wfd, Buffer.concat([head, data]));
    } catch (e) {
      return this.died(`writing to it failed (${errorMessage(e)})`);
    }
    const h = this.readExact(4);
    if (!h) return this.died('it closed its channel');
    const b = this.readExact(h.readUInt32LE(0));
    if (!b) return this.died('it closed its channel mid-answer');
    let msg: { seq?: number; ok?: boolean; result?: unknown; error?: WorkerErrorBody };
    try {
      msg = JSON.parse(b.toString('utf8')) as typeof msg;
    } catch {
      this.dead = 'a frame on its response channel that is not JSON';
      throw new TorchWorkerError({ kind: 'hack', message: `${this.dead} (something other than the worker wrote to it)` }, true);
    }
    if (msg.seq !== seq) {
      this.dead = `an answer numbered ${msg.seq} to request ${seq}`;
      throw new TorchWorkerError({ kind: 'hack', message: `${this.dead} on its response channel (a forged frame?)` }, true);
    }
    if (!msg.ok) {
      const err = msg.error ?? { kind: 'internal', message: 'failed without saying why' };
      if (err.kind === 'fatal') this.dead = `a sticky device error earlier: ${err.message}`;
      throw new TorchWorkerError(err);
    }
    return (msg.result ?? {}) as T;
  }

  private died(how: string): never {
    const s = lastLines(tail(join(this.dir, 'stderr.log')), 12);
    this.dead = `the PyTorch worker died: ${how}${s ? `; its stderr ends: ${s}` : ''}`;
    throw new TorchWorkerError({ kind: 'fatal', message: this.dead }, true);
  }

  private readExact(n: number): Buffer | undefined {
    const buf = Buffer.alloc(n);
    let got = 0;
    while (got < n) {
      let k: number;
      try {
        k = readSync(this.rfd, buf, got, n - got, null);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EAGAIN') continue;
        throw e;
      }
      if (k === 0) return undefined;
      got += k;
    }
    return buf;
  }

  /** Ask the worker to exit, then kill it and remove its folder. Safe to call twice. */
  close(): void {
    if (!live.delete(this)) return;
    if (!this.dead) {
      try {
        this.request('shutdown');
      } catch {
        // already gone
      }
      this.dead = 'it was shut down';
    }
    for (const fd of [this.wfd, this.rfd]) {
      try {
        closeSync(fd);
      } catch {
        // closed
      }
    }
    try {
      this.child.kill('SIGKILL');
    } catch {
      // gone
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** A file beside the FIFOs (the CPU path's shared-memory buffers live there). */
  path(name: string): string {
    return join(this.dir, name);
  }
}

function writeAll(fd: number, data: Buffer): void {
  let off = 0;
  while (off < data.byteLength) {
    try {
      off += writeSync(fd, data, off, data.byteLength - off);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EAGAIN') continue;
      throw e;
    }
  }
}

function tail(path: string): string {
  try {
    const s = readFileSync(path, 'utf8');
    return s.length > 8000 ? s.slice(-8000) : s;
  } catch {
    return '';
  }
}

function lastLines(s: string, n: number): string {
  return s.trim().split('\n').slice(-n).join(' | ');
}
