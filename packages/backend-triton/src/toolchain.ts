/**
 * The process-wide Triton toolchain: which Python compiles (probed once), the long-lived compile helper behind
 * it (started on the first compile, stopped with close() or when the process exits), and the conversion of the
 * helper's answers into results or typed errors.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setting } from '@fastkernels/core';
import { tritonCacheDir, sha256 } from './cache.js';
import { HelperClient, type HelperCommand, type HelperResponse } from './client.js';
import { TritonUnavailableError, toCompileError } from './errors.js';
import { HELPER_SOURCE } from './helper-source.generated.js';
import { parseCompileResult, type CompiledTriton } from './metadata.js';
import { probeTriton, type Env, type ProbeRunner, type TritonAvailability } from './python.js';

export type ConstexprValue = number | boolean | string | null | { readonly float: number };

/** A compile request in the helper's terms (see python/fk_triton_compile.py). */
export interface CompileRequest {
  readonly source: string;
  /** Shown in errors; also names the temporary module file. */
  readonly filename: string;
  readonly fn: string;
  /** Every parameter in order: a Triton type, or 'constexpr'. */
  readonly signature: Readonly<Record<string, string>>;
  readonly constexprs: Readonly<Record<string, ConstexprValue>>;
  readonly attrs: Readonly<Record<string, readonly (readonly [string, number])[]>>;
  readonly options: Readonly<Record<string, unknown>>;
  readonly target: { readonly backend: 'cuda'; readonly arch: number; readonly warp_size: number };
}

export interface CompileOutcome {
  /** The helper's result object (for the disk cache). */
  readonly raw: Record<string, unknown>;
  readonly compiled: CompiledTriton;
}

export interface ToolchainOptions {
  readonly env?: Env;
  /** Use this command instead of `<python> -u fk_triton_compile.py` (tests run a fake helper). */
  readonly helper?: HelperCommand;
  /** Skip the probe and report this (tests). */
  readonly availability?: TritonAvailability;
  readonly probe?: ProbeRunner;
  /** Per-compile time limit (default FASTKERNELS_TRITON_TIMEOUT_MS or 300 s). */
  readonly timeoutMs?: number;
}

export class TritonToolchain {
  private static instance: TritonToolchain | undefined;
  private avail: TritonAvailability | undefined;
  private helperClient: HelperClient | undefined;
  readonly env: Env;
  readonly timeoutMs: number;

  /** The process-wide toolchain (FASTKERNELS_PYTHON and friends read from process.env). */
  static get(): TritonToolchain {
    return (TritonToolchain.instance ??= new TritonToolchain());
  }

  /** Replace the process-wide toolchain (tests); the old one is closed. */
  static setDefault(tc: TritonToolchain | undefined): void {
    const old = TritonToolchain.instance;
    TritonToolchain.instance = tc;
    if (old && old !== tc) void old.close();
  }

  constructor(readonly options: ToolchainOptions = {}) {
    this.env = options.env ?? process.env;
    this.timeoutMs = options.timeoutMs ?? setting('FASTKERNELS_TRITON_TIMEOUT_MS', this.env);
  }

  /** Which Python and Triton compile (probed once; never throws). */
  availability(): TritonAvailability {
    return (this.avail ??= this.options.availability ?? probeTriton(this.env, this.options.probe));
  }

  /** The availability, or a TritonUnavailableError saying what to install or set. */
  requireAvailable(): TritonAvailability & { tritonVersion: string; python: string } {
    const a = this.availability();
    if (!a.available || !a.tritonVersion || !a.python) throw new TritonUnavailableError(`Triton kernels cannot be compiled: ${a.reason ?? 'Triton is not available'}`);
    return a as TritonAvailability & { tritonVersion: string; python: string };
  }

  /** The command that starts the helper: `<python> -u <cache>/triton/helper/fk_triton_compile-<hash>.py`. */
  helperCommand(): HelperCommand {
    if (this.options.helper) return this.options.helper;
    const a = this.requireAvailable();
    return { command: a.python, args: ['-u', writeHelperScript(this.env)], env: { ...this.env, PYTHONDONTWRITEBYTECODE: '1', PYTHONUNBUFFERED: '1' } };
  }

  private client(): HelperClient {
    return (this.helperClient ??= new HelperClient(this.helperCommand(), { timeoutMs: this.timeoutMs }));
  }

  /** The helper's own report (Python, Triton version as imported). */
  hello(): Record<string, unknown> {
    const r = this.client().requestSync({ op: 'hello' });
    if (!r.ok || !r.result) throw new Error(`the Triton helper failed to start: ${r.error?.message ?? 'no answer'}${r.error?.stderr ? `\n${r.error.stderr}` : ''}`);
    return r.result;
  }

  compileSync(req: CompileRequest, timeoutMs = this.timeoutMs): CompileOutcome {
    this.requireAvailable();
    return this.outcome(req, this.client().requestSync({ op: 'compile', ...req }, timeoutMs));
  }

  async compileAsync(req: CompileRequest, timeoutMs = this.timeoutMs): Promise<CompileOutcome> {
    this.requireAvailable();
    return this.outcome(req, await this.client().request({ op: 'compile', ...req }, timeoutMs));
  }

  private outcome(req: CompileRequest, r: HelperResponse): CompileOutcome {
    if (r.ok && r.result) return { raw: r.result, compiled: parseCompileResult(r.result) };
    const e = r.error ?? { kind: 'internal', message: 'the helper answered neither a result nor an error' };
    if (e.kind === 'no_triton') {
      throw new TritonUnavailableError(`${e.message}. Install Triton for that Python, or set FASTKERNELS_PYTHON to a Python that has it.`);
    }
    throw toCompileError(req.fn, req.filename, req.source, e);
  }

  /** Stop the helper process (it also exits by itself when this process ends). */
  async close(): Promise<void> {
    const c = this.helperClient;
    this.helperClient = undefined;
    await c?.close();
  }
}

/** Write the embedded helper where Python can run it (once per content); falls back to the temp dir. */
export function writeHelperScript(env: Env = process.env): string {
  const name = `fk_triton_compile-${sha256(HELPER_SOURCE).slice(0, 12)}.py`;
  for (const dir of [join(tritonCacheDir(env), 'helper'), join(tmpdir(), 'fastkernels-triton')]) {
    const path = join(dir, name);
    if (existsSync(path)) return path;
    try {
      mkdirSync(dir, { recursive: true });
      const tmp = join(dir, `.${name}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
      writeFileSync(tmp, HELPER_SOURCE);
      renameSync(tmp, path);
      return path;
    } catch {
      /* read-only cache dir: try the next */
    }
  }
  throw new Error('cannot write the Triton compile helper script (neither the cache dir nor the temp dir is writable)');
}
