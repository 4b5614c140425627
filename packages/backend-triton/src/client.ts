/**
 * The client of the long-lived compile helper (JSON lines over the helper's stdin/stdout).
 *
 * Kernel launches are synchronous (a module's forward() compiles on first use), so compiles must be too, yet the
 * helper should live across compiles so they do not pay Python's and Triton's start-up each time. A worker thread
 * owns the helper process; the JS thread posts a request on a MessagePort and, for a synchronous request, blocks
 * in Atomics.wait until the worker signals, then takes the answer with receiveMessageOnPort. Asynchronous requests
 * use the same port with a listener. Timeouts are enforced by the worker (it kills a stuck helper; the next
 * request starts a fresh one), with a backstop on the JS thread.
 */
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import type { HelperErrorJson } from './errors.js';

export interface HelperCommand {
  readonly command: string;
  readonly args: readonly string[];
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly cwd?: string;
}

export interface HelperResponse {
  readonly id: number;
  readonly ok: boolean;
  readonly result?: Record<string, unknown>;
  readonly error?: HelperErrorJson;
}

export interface HelperClientOptions {
  /** Default time a request may take (ms). */
  readonly timeoutMs?: number;
}

/** The worker thread's code (CommonJS, evaluated): it owns the helper process. */
const WORKER_SOURCE = String.raw`
const { workerData } = require('node:worker_threads');
const { spawn } = require('node:child_process');
const { port, flag: flagBuffer, command, args, env, cwd } = workerData;
const flag = new Int32Array(flagBuffer);
let child = null;
let buffered = '';
let errTail = '';
const pending = new Map();
const TAIL = 16384;

function signal() { Atomics.add(flag, 0, 1); Atomics.notify(flag, 0); }
function reply(m) { port.postMessage(m); signal(); }
function fail(id, kind, message) { reply({ id, ok: false, error: { kind, message, frames: [], stderr: errTail.slice(-8192) } }); }
function failAll(kind, message, except) {
  for (const [id, p] of pending) { clearTimeout(p.timer); if (id !== except) fail(id, kind, message); }
  pending.clear();
}
function describe(code, sig) { return sig ? 'killed by ' + sig : 'exit status ' + code; }

function start() {
  errTail = '';
  buffered = '';
  let c;
  try {
    c = spawn(command, args, { env: env || process.env, cwd: cwd || undefined, stdio: ['pipe', 'pipe', 'pipe'] });
  } catch (e) {
    return e;
  }
  child = c;
  c.stdout.setEncoding('utf8');
  c.stdout.on('data', (d) => {
    if (child !== c) return;
    buffered += d;
    let i;
    while ((i = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, i);
      buffered = buffered.slice(i + 1);
      onLine(line);
    }
  });
  c.stderr.setEncoding('utf8');
  c.stderr.on('data', (d) => { if (child === c) errTail = (errTail + d).slice(-TAIL); });
  c.stdin.on('error', () => {});
  c.on('error', (e) => {
    if (child !== c) return;
    child = null;
    failAll('spawn', 'could not run the Triton helper with ' + command + ': ' + e.message);
  });
  c.on('exit', (code, sig) => {
    if (child !== c) return;
    child = null;
    failAll('crash', 'the Triton helper (' + command + ') stopped (' + describe(code, sig) + ') before answering');
  });
  return null;
}

function onLine(line) {
  if (!line.trim()) return;
  let m;
  try { m = JSON.parse(line); } catch (e) { errTail = (errTail + '\n[helper stdout] ' + line).slice(-TAIL); return; }
  const p = pending.get(m.id);
  if (!p) return; // an answer after its timeout
  clearTimeout(p.timer);
  pending.delete(m.id);
  if (!m.ok && m.error) m.error.stderr = errTail.slice(p.errFrom).slice(-8192);
  reply(m);
}

function onTimeout(id, ms) {
  const c = child;
  child = null;
  fail(id, 'timeout', 'the Triton helper did not answer within ' + ms + ' ms and was killed (set FASTKERNELS_TRITON_TIMEOUT_MS to allow longer compiles)');
  failAll('timeout', 'the Triton helper was killed: a request before this one timed out', id);
  if (c) c.kill('SIGKILL');
}

function shutdown(graceMs) {
  const c = child;
  child = null;
  failAll('shutdown', 'the Triton helper was shut down');
  const done = () => { port.postMessage({ type: 'closed' }); signal(); port.close(); };
  if (!c) return done();
  const killer = setTimeout(() => c.kill('SIGKILL'), graceMs);
  c.once('exit', () => { clearTimeout(killer); done(); });
  try { c.stdin.write(JSON.stringify({ id: 0, op: 'shutdown' }) + '\n'); c.stdin.end(); } catch (e) { c.kill('SIGKILL'); }
}

port.on('message', (msg) => {
  if (msg.type === 'shutdown') return shutdown(msg.graceMs);
  if (msg.type !== 'request') return;
  if (!child) {
    const e = start();
    if (e) return fail(msg.id, 'spawn', 'could not run the Triton helper with ' + command + ': ' + e.message);
  }
  const timer = setTimeout(() => onTimeout(msg.id, msg.timeoutMs), msg.timeoutMs);
  pending.set(msg.id, { timer, errFrom: errTail.length });
  child.stdin.write(JSON.stringify(Object.assign({}, msg.body, { id: msg.id })) + '\n');
});
`;

interface Waiter {
  resolve(r: HelperResponse): void;
}

export class HelperClient {
  private worker: Worker | undefined;
  private port: MessagePort | undefined;
  private flag: Int32Array | undefined;
  private nextId = 1;
  private readonly waiters = new Map<number, Waiter>();
  private readonly done = new Map<number, HelperResponse>();
  private closedPromise: Promise<void> | undefined;
  readonly timeoutMs: number;

  constructor(
    readonly cmd: HelperCommand,
    opts: HelperClientOptions = {},
  ) {
    this.timeoutMs = opts.timeoutMs ?? 300_000;
  }

  /** Whether the worker (and so possibly a helper process) is running. */
  get running(): boolean {
    return this.worker !== undefined;
  }

  private ensure(): { port: MessagePort; flag: Int32Array } {
    if (this.port && this.flag) return { port: this.port, flag: this.flag };
    const sab = new SharedArrayBuffer(4);
    const { port1, port2 } = new MessageChannel();
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.cmd.env ?? process.env)) if (v !== undefined) env[k] = v;
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { port: port2, flag: sab, command: this.cmd.command, args: [...this.cmd.args], env, cwd: this.cmd.cwd ?? null },
      transferList: [port2],
      stdout: false,
      stderr: false,
    });
    worker.unref();
    worker.on('error', (e) => this.failAll(`the Triton helper's worker thread failed: ${e.message}`));
    worker.on('exit', () => {
      if (this.worker === worker) this.reset();
    });
    port1.on('message', (m: HelperResponse & { type?: string }) => this.dispatch(m));
    port1.unref();
    this.worker = worker;
    this.port = port1;
    this.flag = new Int32Array(sab);
    return { port: port1, flag: this.flag };
  }

  private reset(): void {
    this.failAll('the Triton helper client was closed');
    this.port?.close();
    this.worker = undefined;
    this.port = undefined;
    this.flag = undefined;
  }

  private dispatch(m: HelperResponse & { type?: string }): void {
    if (m.type === 'closed') return;
    const w = this.waiters.get(m.id);
    if (w) {
      this.waiters.delete(m.id);
      if (this.waiters.size === 0) this.port?.unref();
      w.resolve(m);
    } else this.done.set(m.id, m);
  }

  private failAll(message: string): void {
    for (const [id, w] of this.waiters) w.resolve({ id, ok: false, error: { kind: 'crash', message, frames: [] } });
    this.waiters.clear();
  }

  private post(body: Record<string, unknown>, timeoutMs: number): number {
    const { port } = this.ensure();
    const id = this.nextId++;
    port.postMessage({ type: 'request', id, body, timeoutMs });
    return id;
  }

  /** Send a request and block the JS thread until the answer (or the timeout). */
  requestSync(body: Record<string, unknown>, timeoutMs = this.timeoutMs): HelperResponse {
    const id = this.post(body, timeoutMs);
    const { port, flag } = this.ensure();
    const deadline = Date.now() + timeoutMs + 10_000; // the worker times out first; this is a backstop
    for (;;) {
      const seen = Atomics.load(flag, 0);
      for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) {
        const msg = m.message as HelperResponse & { type?: string };
        if (msg.id === id && msg.type === undefined) return msg;
        this.dispatch(msg);
      }
      const hit = this.done.get(id);
      if (hit) {
        this.done.delete(id);
        return hit;
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        this.close().catch(() => {});
        return { id, ok: false, error: { kind: 'timeout', message: `no answer from the Triton helper's worker within ${timeoutMs} ms`, frames: [] } };
      }
      Atomics.wait(flag, 0, seen, Math.min(left, 1000));
    }
  }

  /** Send a request; resolves with the answer (never rejects: failures are answers with ok=false). */
  request(body: Record<string, unknown>, timeoutMs = this.timeoutMs): Promise<HelperResponse> {
    const id = this.post(body, timeoutMs);
    const hit = this.done.get(id);
    if (hit) {
      this.done.delete(id);
      return Promise.resolve(hit);
    }
    return new Promise((resolve) => {
      this.waiters.set(id, { resolve });
      this.port!.ref();
    });
  }

  /** Ask the helper to exit (killed after `graceMs`), then stop the worker. Safe to call twice. */
  close(graceMs = 3000): Promise<void> {
    if (this.closedPromise) return this.closedPromise;
    const worker = this.worker;
    const port = this.port;
    if (!worker || !port) return Promise.resolve();
    this.closedPromise = new Promise<void>((resolve) => {
      const finish = () => {
        clearTimeout(t);
        resolve();
      };
      const t = setTimeout(() => {
        void worker.terminate().then(finish, finish);
      }, graceMs + 2000);
      worker.once('exit', finish);
      port.postMessage({ type: 'shutdown', graceMs });
    }).finally(() => {
      this.closedPromise = undefined;
      if (this.worker === worker) this.reset();
    });
    return this.closedPromise;
  }
}
