/**
 * `fastkernels launch --nproc N -- <command>`: one process per GPU on this host, like torchrun --standalone.
 *
 * Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT (the
 * rendezvous port), FASTKERNELS_LOCAL_RANK, FASTKERNELS_RDZV_TOKEN and NCCL_NVLS_ENABLE=0 (NVLink multicast off
 * unless the user set it). Devices: 'all' (default) leaves every GPU visible and the rank uses device LOCAL_RANK
 * (what torchrun does; NCCL's P2P/NVLink path needs the peers visible); 'split' gives each rank one GPU through
 * CUDA_VISIBLE_DEVICES (it then uses device 0).
 *
 * Every rank runs in its own process group. When one rank fails (non-zero exit or a signal) the launcher names it,
 * sends SIGTERM to the process groups of the others and SIGKILL after a grace period, and its result carries the
 * failed rank's code. SIGINT/SIGTERM sent to the launcher are forwarded to every rank (a second one kills).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, delimiter } from 'node:path';
import { constants } from 'node:os';
import { RENDEZVOUS_HOST, RendezvousServer, newToken } from './rendezvous.js';

export type DeviceMode = 'all' | 'split';

export interface LaunchOptions {
  readonly nproc: number;
  readonly command: string;
  readonly args?: readonly string[];
  /** Base environment (default process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly cwd?: string;
  readonly devices?: DeviceMode;
  /** Once the first rank reaches the rendezvous, all must arrive within this (default 300 s). */
  readonly rendezvousTimeoutMs?: number;
  /** SIGTERM -> SIGKILL grace when stopping ranks (default 5 s). */
  readonly killGraceMs?: number;
  /** 'inherit' (default), 'prefix' ("[rank N] " before every line), or a callback per line. */
  readonly output?: 'inherit' | 'prefix' | ((rank: number, stream: 'stdout' | 'stderr', line: string) => void);
  /** Where the launcher's own messages go (default stderr). */
  readonly log?: (line: string) => void;
  /** Install SIGINT/SIGTERM handlers on this process that forward to the ranks (default true). */
  readonly forwardSignals?: boolean;
}

export interface RankExit {
  readonly rank: number;
  readonly pid: number;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface LaunchResult {
  /** 0 when every rank exited 0; the failed rank's code (128 + signal number for a signal); 128 + n when interrupted. */
  readonly exitCode: number;
  readonly ranks: readonly RankExit[];
  /** The first rank that failed, when one did. */
  readonly failed?: RankExit & { readonly reason: string };
  /** The signal forwarded to the ranks when the launcher was interrupted. */
  readonly interrupted?: NodeJS.Signals;
  /** A launcher-side failure (rendezvous timeout, spawn error). */
  readonly error?: string;
  readonly port: number;
}

export interface LaunchHandle {
  readonly port: number;
  readonly pids: readonly number[];
  readonly result: Promise<LaunchResult>;
  /** Forward a signal to every live rank (what the SIGINT/SIGTERM handlers do). */
  signal(sig: NodeJS.Signals): void;
}

/** The environment of one rank (exported for tests). */
export function rankEnv(base: Readonly<Record<string, string | undefined>>, rank: number, nproc: number, port: number, token: string, devices: DeviceMode): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) if (v !== undefined) env[k] = v;
  Object.assign(env, {
    RANK: String(rank),
    WORLD_SIZE: String(nproc),
    LOCAL_RANK: String(rank),
    LOCAL_WORLD_SIZE: String(nproc),
    MASTER_ADDR: RENDEZVOUS_HOST,
    MASTER_PORT: String(port),
    FASTKERNELS_LOCAL_RANK: String(rank),
    FASTKERNELS_RDZV_TOKEN: token,
    FASTKERNELS_LAUNCHED: '1',
  });
  // NVLink multicast (NVLS) stays off unless the user asked for it.
  if (base.NCCL_NVLS_ENABLE === undefined) env.NCCL_NVLS_ENABLE = '0';
  if (devices === 'split') {
    const visible = (base.CUDA_VISIBLE_DEVICES ?? '').split(',').map((s) => s.trim()).filter(Boolean);
    if (visible.length > 0 && rank >= visible.length) throw new RangeError(`launch: ${nproc} ranks but CUDA_VISIBLE_DEVICES lists ${visible.length} device(s)`);
    env.CUDA_VISIBLE_DEVICES = visible.length ? visible[rank]! : String(rank);
    env.FASTKERNELS_DEVICE = '0';
  } else {
    env.FASTKERNELS_DEVICE = String(rank);
  }
  // Ranks that run `node` get the launcher's own node (the GPU host has no node on PATH).
  env.PATH = [dirname(process.execPath), env.PATH].filter(Boolean).join(delimiter);
  return env;
}

function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `was killed by ${signal}` : `exited with code ${code}`;
}

function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (signal) return 128 + ((constants.signals as Record<string, number>)[signal] ?? 1);
  return code ?? 1;
}

/** Start the ranks. The handle's `result` resolves when every rank has exited (it never rejects). */
export async function launch(opts: LaunchOptions): Promise<LaunchHandle> {
  const { nproc, command } = opts;
  if (!Number.isInteger(nproc) || nproc < 1) throw new RangeError(`launch: --nproc must be a positive integer (got ${nproc})`);
  if (!command) throw new RangeError('launch: no command given (usage: fastkernels launch --nproc N -- <command> [args...])');
  const base = opts.env ?? process.env;
  const devices = opts.devices ?? 'all';
  const grace = opts.killGraceMs ?? 5000;
  const rdzvTimeout = opts.rendezvousTimeoutMs ?? 300_000;
  const log = opts.log ?? ((l: string) => void process.stderr.write(l + '\n'));
  const say = (m: string) => log(`fastkernels launch: ${m}`);
  const token = newToken();

  let rdzvTimer: NodeJS.Timeout | undefined;
  const server = new RendezvousServer({
    world: nproc,
    token,
    onFirstHello: () => {
      rdzvTimer = setTimeout(() => {
        const missing = [...Array(nproc).keys()].filter((r) => !server.arrived.includes(r));
        stopAll(`the rendezvous timed out after ${Math.round(rdzvTimeout / 1000)} s: rank(s) ${missing.join(', ')} never connected; stopping all ranks`, 'rendezvous timeout');
      }, rdzvTimeout);
      rdzvTimer.unref();
    },
    onComplete: () => clearTimeout(rdzvTimer),
    onReject: (why) => say(`rendezvous: refused a connection (${why})`),
  });
  const port = await server.start();
  const envs = [...Array(nproc).keys()].map((r) => rankEnv(base, r, nproc, port, token, devices));

  const children: (ChildProcess | undefined)[] = [];
  const exits: (RankExit | undefined)[] = new Array(nproc).fill(undefined);
  let failed: (RankExit & { reason: string }) | undefined;
  let interrupted: NodeJS.Signals | undefined;
  let launcherError: string | undefined;
  let stopping = false;
  let killTimer: NodeJS.Timeout | undefined;
  let resolveResult!: (r: LaunchResult) => void;
  const result = new Promise<LaunchResult>((res) => (resolveResult = res));

  const alive = () => children.map((c, r) => (c && !exits[r] ? c : undefined)).filter((c): c is ChildProcess => !!c);
  const killGroup = (c: ChildProcess, sig: NodeJS.Signals) => {
    if (c.pid === undefined) return;
    try {
      process.kill(-c.pid, sig);
    } catch {
      try {
        c.kill(sig);
      } catch {
        /* already gone */
      }
    }
  };
  const escalate = () => {
    clearTimeout(killTimer);
    killTimer = setTimeout(() => {
      const left = alive();
      if (left.length) say(`${left.length} rank(s) still running after ${grace} ms; sending SIGKILL`);
      for (const c of left) killGroup(c, 'SIGKILL');
    }, grace);
    killTimer.unref();
  };
  function stopAll(message: string, why: string): void {
    if (stopping) return;
    stopping = true;
    launcherError ??= why === 'failure' ? undefined : message;
    say(message);
    for (const c of alive()) killGroup(c, 'SIGTERM');
    escalate();
  }

  const signal = (sig: NodeJS.Signals) => {
    if (interrupted) {
      say(`second ${sig}: killing all ranks`);
      for (const c of alive()) killGroup(c, 'SIGKILL');
      return;
    }
    interrupted = sig;
    stopping = true;
    say(`${sig} received: forwarding it to ${alive().length} rank(s)`);
    for (const c of alive()) killGroup(c, sig);
    escalate();
  };
  const onSigint = () => signal('SIGINT');
  const onSigterm = () => signal('SIGTERM');
  if (opts.forwardSignals !== false) {
    process.on('SIGINT', onSigint);
    process.on('SIGTERM', onSigterm);
  }

  const finishIfDone = () => {
    if (exits.some((e) => !e)) return;
    clearTimeout(killTimer);
    clearTimeout(rdzvTimer);
    server.close();
    if (opts.forwardSignals !== false) {
      process.off('SIGINT', onSigint);
      process.off('SIGTERM', onSigterm);
    }
    const ranks = exits as RankExit[];
    let exitCode = 0;
    if (failed) exitCode = exitCodeOf(failed.code, failed.signal) || 1;
    else if (interrupted) exitCode = 128 + ((constants.signals as Record<string, number>)[interrupted] ?? 2);
    else if (launcherError) exitCode = 1;
    else {
      const bad = ranks.find((r) => r.code !== 0 || r.signal);
      if (bad) exitCode = exitCodeOf(bad.code, bad.signal) || 1;
    }
    resolveResult({ exitCode, ranks, failed, interrupted, error: launcherError, port });
  };

  const pipeLines = (rank: number, stream: 'stdout' | 'stderr', src: NodeJS.ReadableStream | null) => {
    if (!src) return;
    const out = opts.output;
    let buf = '';
    src.setEncoding('utf8');
    const emit = (line: string) => {
      if (typeof out === 'function') out(rank, stream, line);
      else (stream === 'stdout' ? process.stdout : process.stderr).write(`[rank ${rank}] ${line}\n`);
    };
    src.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        emit(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
      }
    });
    src.on('end', () => {
      if (buf) emit(buf);
      buf = '';
    });
  };

  for (let rank = 0; rank < nproc; rank++) {
    const piped = opts.output !== undefined && opts.output !== 'inherit';
    const child = spawn(command, [...(opts.args ?? [])], {
      env: envs[rank],
      cwd: opts.cwd,
      detached: true, // its own process group: the launcher stops a rank with everything it started
      stdio: ['ignore', piped ? 'pipe' : 'inherit', piped ? 'pipe' : 'inherit'],
    });
    children.push(child);
    if (piped) {
      pipeLines(rank, 'stdout', child.stdout);
      pipeLines(rank, 'stderr', child.stderr);
    }
    child.on('error', (e) => {
      if (exits[rank]) return;
      exits[rank] = { rank, pid: child.pid ?? 0, code: 127, signal: null };
      if (!failed && !interrupted) {
        failed = { ...exits[rank]!, reason: `could not start ${command}: ${e.message}` };
        stopAll(`rank ${rank} could not start ${command} (${e.message}); stopping the other rank(s)`, 'failure');
      }
      finishIfDone();
    });
    child.on('exit', (code, sig) => {
      if (exits[rank]) return;
      const ex: RankExit = { rank, pid: child.pid ?? 0, code, signal: sig };
      exits[rank] = ex;
      const bad = code !== 0 || sig !== null;
      if (bad && !failed && !stopping) {
        failed = { ...ex, reason: `rank ${rank} (pid ${ex.pid}) ${describeExit(code, sig)}` };
        const others = alive().length;
        stopAll(`${failed.reason}; stopping the other ${others} rank(s)`, 'failure');
      }
      finishIfDone();
    });
  }
  return { port, pids: children.map((c) => c?.pid ?? 0), result, signal };
}

/** Run to completion: launch and wait (the CLI's entry point). */
export async function runLaunch(opts: LaunchOptions): Promise<LaunchResult> {
  const h = await launch(opts);
  return h.result;
}
