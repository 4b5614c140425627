import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setting } from '@fastkernels/core';
import type { BenchProgress, CaseResult, MachineProfile, PreflightFailure, RunEnvironment, TaskCase, TaskDefinition, WorkerBody, WorkerOptions } from '@fastkernels/core';
import { openMessage } from './protocol.js';
import { loadRow } from './worker.js';

/**
 * The parent's side of a bench worker: fork the CLI's own entry (`process.argv[1]`, the package's
 * dist/bin.js or the single-file bundle) with the hidden `__worker` command in its own process group,
 * talk over the signed IPC channel, and watch it: a wall timeout per task and a stall timeout on
 * silence kill the whole process group; a crash becomes the task's status; stdout is never trusted.
 */

export interface WorkerSpec {
  readonly backend: string;
  /** The GPU index (the worker sees it as device 0 through CUDA_VISIBLE_DEVICES). */
  readonly physicalDevice: number;
  readonly candidates: string | null;
  readonly options: WorkerOptions;
  readonly verbose: boolean;
  readonly onLog?: (line: string) => void;
  /**
   * A group worker (bench/group.ts): these variables join it to its peers' workers, every GPU stays visible (NCCL's
   * P2P path needs its peers) and it uses `physicalDevice` by its index.
   */
  readonly group?: { readonly env: Readonly<Record<string, string>> };
}

export interface ReadyInfo {
  readonly env: RunEnvironment;
  readonly profile: MachineProfile;
  readonly failures: readonly PreflightFailure[];
  readonly dirty: boolean;
}

export interface TaskOutcome {
  readonly results: CaseResult[];
  /** The worker must not be reused (crashed, killed, tampered with, a sticky CUDA error). */
  readonly recycle: boolean;
}

export interface Timeouts {
  readonly taskMs: number;
  readonly stallMs: number;
}

type Waiter = (m: WorkerBody | { type: 'exit'; code: number | null; signal: NodeJS.Signals | null } | { type: 'forged'; why: string }) => void;

const STDERR_KEEP = 4000;

export class WorkerProc {
  private child: ChildProcess | undefined;
  private readonly secret = randomBytes(32).toString('hex');
  private lastSeq = 0;
  private waiter: Waiter | undefined;
  private pending: Parameters<Waiter>[0][] = [];
  private stderrTail = '';
  private exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  constructor(readonly spec: WorkerSpec) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Start the worker and wait for `ready` (preflight-loading `preflight` candidates). */
  async start(preflight: readonly string[], profile: MachineProfile | undefined, stallMs: number): Promise<ReadyInfo> {
    const entry = setting('FASTKERNELS_WORKER_ENTRY') ?? process.argv[1]!;
    const env: NodeJS.ProcessEnv = { ...process.env, ...this.spec.group?.env };
    const isolated = this.spec.backend === 'cuda' && !this.spec.group;
    if (isolated) env.CUDA_VISIBLE_DEVICES = String(this.spec.physicalDevice);
    const child = fork(entry, ['__worker'], { detached: true, stdio: ['ignore', 'pipe', 'pipe', 'ipc'], env, serialization: 'json' });
    this.child = child;
    child.stdout?.on('data', (d: Buffer) => this.log('stdout', d));
    child.stderr?.on('data', (d: Buffer) => {
      this.stderrTail = (this.stderrTail + d.toString()).slice(-STDERR_KEEP);
      this.log('stderr', d);
    });
    child.on('message', (m) => {
      const opened = openMessage(this.secret, m);
      if (!opened.ok) return this.deliver({ type: 'forged', why: opened.why });
      if (opened.body.seq <= this.lastSeq) return this.deliver({ type: 'forged', why: `a replayed message (sequence ${opened.body.seq} after ${this.lastSeq})` });
      this.lastSeq = opened.body.seq;
      this.deliver(opened.body);
    });
    child.on('exit', (code, signal) => {
      this.exited = { code, signal };
      this.deliver({ type: 'exit', code, signal });
    });
    child.on('error', () => {});
    child.send({
      type: 'init', secret: this.secret, backend: this.spec.backend,
      device: isolated ? 0 : this.spec.physicalDevice, physicalDevice: this.spec.physicalDevice,
      candidates: this.spec.candidates, preflight: [...preflight], options: this.spec.options, ...(profile ? { profile } : {}),
    });
    for (;;) {
      const m = await this.receive(stallMs);
      if (m === 'timeout') {
        this.kill();
        throw new Error(`the bench worker did not start within ${Math.round(stallMs / 1000)} s`);
      }
      if (m.type === 'ready') return { env: m.env, profile: m.profile, failures: m.failures, dirty: m.dirty };
      if (m.type === 'fatal') {
        this.kill();
        const e = new Error(m.message) as Error & { usage?: boolean };
        e.usage = m.usage;
        throw e;
      }
      if (m.type === 'exit') throw new Error(`the bench worker exited while starting (${describeExit(m.code, m.signal)})${this.tail()}`);
      if (m.type === 'forged') {
        this.kill();
        const failures: PreflightFailure[] = preflight.map((taskId) => ({ taskId, file: taskId, message: `REWARD_HACK at import: ${m.why}`, hack: true }));
        throw Object.assign(new Error(`a candidate wrote to the result channel while being imported: ${m.why}`), { failures });
      }
    }
  }

  /** Run one task; never throws: timeouts, crashes and forgeries become the task's rows. */
  async runTask(task: TaskDefinition, cases: readonly (TaskCase & { values?: Record<string, { file: string; tensor: string }> })[], t: Timeouts, onProgress: (p: BenchProgress) => void): Promise<TaskOutcome> {
    const results: CaseResult[] = [];
    let last: BenchProgress | undefined;
    const rest = (status: CaseResult['status'], detail: string): TaskOutcome => {
      this.kill();
      for (const c of cases.slice(results.length)) results.push(loadRow(task, c.name, c.dtype, status, detail));
      return { results, recycle: true };
    };
    const where = () => (last ? ` during ${last.case} (${last.phase}${last.total > 1 ? ` ${last.done}/${last.total}` : ''})` : '');
    if (!this.child || this.exited) return rest('RUNTIME_ERROR', 'the bench worker is not running');
    this.child.send({ type: 'task', taskId: task.id, cases });
    const deadline = Date.now() + t.taskMs;
    for (;;) {
      const left = deadline - Date.now();
      const m = await this.receive(Math.max(1, Math.min(t.stallMs, left)));
      if (m === 'timeout') {
        if (Date.now() >= deadline) return rest('TIMEOUT', `killed after ${fmtS(t.taskMs)} (the task's wall-clock limit, --task-timeout)${where()}`);
        return rest('TIMEOUT', `killed after ${fmtS(t.stallMs)} without progress (--stall-timeout)${where()}`);
      }
      switch (m.type) {
        case 'progress':
          last = m as unknown as BenchProgress;
          onProgress(last);
          break;
        case 'case':
          if (m.taskId === task.id) results.push(m.result);
          break;
        case 'done':
          return { results, recycle: m.dirty };
        case 'forged':
          return rest('REWARD_HACK', `the candidate wrote to the harness's result channel: ${m.why}`);
        case 'exit':
          return rest('RUNTIME_ERROR', `the bench worker died (${describeExit(m.code, m.signal)})${where()}${crashHint(this.stderrTail)}${this.tail()}`);
        case 'fatal':
          return rest('RUNTIME_ERROR', `the bench worker failed: ${m.message}`);
        default:
          break;
      }
    }
  }

  /** Ask the worker to exit; kill its process group if it does not within a second. */
  async stop(): Promise<void> {
    if (!this.child || this.exited) return;
    try {
      this.child.send({ type: 'shutdown' });
    } catch {
      // channel closed
    }
    const t = setTimeout(() => this.kill(), 1000);
    await new Promise<void>((r) => (this.exited ? r() : this.child!.once('exit', () => r())));
    clearTimeout(t);
  }

  /** SIGKILL the worker's whole process group (it leads its own, `detached`). */
  kill(): void {
    const pid = this.child?.pid;
    if (!pid || this.exited) return;
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
  }

  private tail(): string {
    const words = lastWords(this.stderrTail);
    return words ? `; its last words: ${words}` : '';
  }

  private log(stream: string, d: Buffer): void {
    if (!this.spec.verbose && !this.spec.onLog) return;
    for (const line of d.toString().split('\n')) if (line) this.spec.onLog?.(`[worker ${this.spec.physicalDevice} ${stream}] ${line}`);
  }

  private deliver(m: Parameters<Waiter>[0]): void {
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w(m);
    } else this.pending.push(m);
  }

  private receive(ms: number): Promise<Parameters<Waiter>[0] | 'timeout'> {
    const m = this.pending.shift();
    if (m) return Promise.resolve(m);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        resolve('timeout');
      }, ms);
      this.waiter = (x) => {
        clearTimeout(timer);
        resolve(x);
      };
    });
  }
}

function fmtS(ms: number): string {
  return ms >= 60_000 && ms % 60_000 === 0 ? `${ms / 60_000} min` : `${+(ms / 1000).toFixed(1)} s`;
}

function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `killed by ${signal}` : `exit code ${code}`;
}

/**
 * What a dead worker's stderr says, on one line: V8's native frames, GC traces, section banners and JS stack frames
 * left out (an out-of-memory abort prints forty lines of them; the reason is the "FATAL ERROR" line).
 */
export function lastWords(stderr: string): string {
  const noise = [/^\d+: 0x[0-9a-f]+/i, /^at /, /^<--- .* --->$/, /^\[\d+:0x[0-9a-f]+\]/i, /^-+ Native stack trace -+$/i, /^Node\.js v\d/, /^\^+$/];
  const lines = stderr.split('\n').map((l) => l.trim()).filter((l) => l && !noise.some((r) => r.test(l)));
  const fatal = lines.find((l) => l.startsWith('FATAL ERROR:'));
  return (fatal ? [fatal] : lines.slice(-3)).join(' | ').slice(0, 600);
}

function crashHint(stderr: string): string {
  if (/heap out of memory|Reached heap limit|allocation failed/i.test(stderr)) return ': out of memory (the JavaScript heap; NODE_OPTIONS=--max-old-space-size=MB raises it)';
  if (/CUDA_ERROR_OUT_OF_MEMORY|out of memory/i.test(stderr)) return ': out of device memory';
  if (/ILLEGAL_ADDRESS|CudaFatalError|illegal memory access/i.test(stderr)) return ': an illegal memory access on the GPU';
  return '';
}
