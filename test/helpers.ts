import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const BIN = join(ROOT, 'packages/cli/dist/bin.js');
export const DEMO = 'examples/candidates/cpu-demo';

export interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Run the built CLI as a user would: `node packages/cli/dist/bin.js ...` from the repo root, no colours. */
export function cli(args: readonly string[], options: { cwd?: string; env?: Record<string, string> } = {}): RunResult {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build first (npx nx run-many -t build --output-style=static)`);
  const r = spawnSync(process.execPath, [BIN, ...args], {
    cwd: options.cwd ?? ROOT,
    encoding: 'utf8',
    env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1', ...options.env },
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A fresh temp folder with the given files (paths relative to it). */
export function tempSet(files: Readonly<Record<string, string>> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'fk-e2e-'));
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  return dir;
}

/** A stack trace line, as Node prints them. */
export const STACK = /^\s+at .+[(:]\d+|node:internal/m;

/** Like cli(), without blocking: several runs can go at once (each is its own process tree). */
export function cliAsync(args: readonly string[], options: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<RunResult> {
  if (!existsSync(BIN)) throw new Error(`${BIN} is missing: build first (npx nx run-many -t build --output-style=static)`);
  return new Promise((resolvePromise) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: options.cwd ?? ROOT,
      env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1', ...options.env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr });
    });
  });
}

/**
 * The GPU-host bundle folder when the tests run from it (dist/gpu-host/run-gpu-tests): $FASTKERNELS_BUNDLE, or the
 * folder above the bundled test file or its chunk (gpu-tests/*.mjs, gpu-tests/chunks/*.mjs); undefined in the repo.
 */
export function gpuHostBundle(): string | undefined {
  const candidates = [process.env.FASTKERNELS_BUNDLE];
  try {
    const here = dirname(fileURLToPath(import.meta.url));
    candidates.push(resolve(here, '..'), resolve(here, '..', '..'));
  } catch {
    /* not a file URL */
  }
  return candidates.find((d): d is string => Boolean(d) && existsSync(join(d!, 'run')) && existsSync(join(d!, 'fastkernels.mjs')));
}

/**
 * Start the CLI as a user would, without waiting: the bundle's `run` launcher when there is one ($FASTKERNELS_CLI
 * overrides), else the repo's built CLI. `child` lets a test watch or signal it; `result` settles when it exits.
 */
export function startCli(args: readonly string[], options: { env?: Record<string, string>; timeoutMs?: number } = {}): { child: ChildProcess; result: Promise<RunResult> } {
  const bundle = gpuHostBundle();
  const launcher = process.env.FASTKERNELS_CLI ?? (bundle ? join(bundle, 'run') : undefined);
  const useLauncher = Boolean(launcher && existsSync(launcher));
  const [cmd, argv] = useLauncher ? [launcher!, [...args]] : [process.execPath, [BIN, ...args]];
  if (!useLauncher && !existsSync(BIN)) throw new Error(`${BIN} is missing: build first (npx nx run-many -t build --output-style=static)`);
  const child = spawn(cmd, argv, { ...(useLauncher ? {} : { cwd: ROOT }), env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1', ...options.env } });
  const result = new Promise<RunResult>((resolvePromise) => {
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr });
    });
  });
  return { child, result };
}

/** Run async jobs with at most `n` at a time (the CI machine has 2 cores). */
export async function pool<T, R>(items: readonly T[], n: number, fn: (x: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  }));
  return out;
}
