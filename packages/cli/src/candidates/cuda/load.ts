/**
 * Loads a CUDA C++ candidate (`L<k>/<stem>.cu` + `L<k>/<stem>.cu.json`): reads and validates the manifest, plans it
 * against the task and the source, and, where the run's backend is CUDA, compiles it now through the CUDA runtime's
 * NVRTC path (its include dirs and disk cubin cache), so a compile error fails the load naming the .cu and line
 * instead of surfacing mid-benchmark. The kernels' first launch then finds the module in the runtime's cache.
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { CudaRuntime } from '@fastkernels/backend-cuda';
import { UserError, errorMessage, withContext, type CandidateFile, type ModuleClass, type TaskDefinition } from '@fastkernels/core';
import { environment, selectBackend } from '../../env.js';
import { planCudaCandidate } from './binding.js';
import { compileErrorToUserError } from './compile-error.js';
import { manifestPathOf, readCudaManifest } from './manifest.js';
import { cudaCandidateClass, type CudaProgram } from './module.js';

export interface CudaLoadOptions {
  /**
   * The backend the candidate will run on: 'cuda' compiles now; another name fails the load (the kernels cannot run
   * there); undefined leaves the compile to the first launch.
   */
  readonly backend?: string;
  /** Compile a program now (throws an error with the compile `log`). Default: the CUDA runtime's NVRTC. */
  readonly compile?: (program: CudaProgram) => Promise<void>;
  /** The baseline's parameter names (default: built once on the CPU backend from the task's first CI case). */
  readonly parameters?: (task: TaskDefinition) => readonly string[];
}

/** The candidate's own headers, `#include "name"` resolved beside the including file (recursively). */
export function candidateHeaders(source: string, dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const visit = (text: string) => {
    for (const m of text.matchAll(/^\s*#\s*include\s*"([^"]+)"/gm)) {
      const name = m[1]!;
      const path = join(dir, name);
      if (name in out || !existsSync(path)) continue; // a toolkit header in quotes: NVRTC's include dirs find it
      out[name] = readFileSync(path, 'utf8');
      visit(out[name]);
    }
  };
  visit(source);
  return out;
}

/** A task baseline's parameters (name, shape), from a module built on the CPU backend for its first CI case. */
export function baselineParameters(task: TaskDefinition): [string, number[]][] {
  const env = environment();
  const c = task.cases.ci[0]!;
  const ctx = { backend: selectBackend(env, 'cpu'), device: 0, dtype: c.dtype, registry: env.registry };
  const m = withContext(ctx, () => new task.baseline(...c.init));
  const out = m.namedParameters().map(([k, t]): [string, number[]] => [k, [...t.shape]]);
  m.dispose();
  return out;
}

/** The names of a task baseline's parameters. */
export const baselineParameterNames = (task: TaskDefinition): string[] => baselineParameters(task).map(([k]) => k);

async function runtimeCompile(p: CudaProgram): Promise<void> {
  await CudaRuntime.get().compileAsync(p.source, { name: p.programName, options: p.options, headers: p.headers });
}

export async function loadCudaCandidate(file: CandidateFile, task: TaskDefinition, options: CudaLoadOptions = {}): Promise<ModuleClass> {
  const manifestFile = manifestPathOf(file.relPath);
  const m = readCudaManifest(manifestPathOf(file.path), manifestFile, file.relPath);
  const dir = dirname(file.path);
  const sourceName = m.source ?? basename(file.path);
  const display = join(dirname(file.relPath), sourceName);
  let source: string;
  try {
    source = readFileSync(join(dir, sourceName), 'utf8');
  } catch (e) {
    throw new UserError(`source: cannot read ${display} (${(e as NodeJS.ErrnoException).code ?? errorMessage(e)})`, { file: manifestFile, field: 'source', fix: 'name a .cu file in the same folder' });
  }
  let parameters: readonly string[];
  try {
    parameters = (options.parameters ?? baselineParameterNames)(task);
  } catch (e) {
    throw new UserError(`cannot build the baseline ${task.className} to learn its parameters: ${errorMessage(e)}`, { file: file.relPath });
  }
  const plan = planCudaCandidate(m, task, source, parameters, { manifest: manifestFile, source: display });
  const headers = candidateHeaders(source, dir);
  const program: CudaProgram = { programName: sourceName, display, source, options: m.nvrtcOptions, headers };

  const compile = options.compile ?? (options.backend === 'cuda' ? runtimeCompile : undefined);
  if (!compile && options.backend !== undefined) {
    throw new UserError(`is a CUDA C++ candidate; this run's backend is ${options.backend}, which cannot run its kernels`, {
      file: file.relPath,
      fix: 'bench it on a GPU host with --backend cuda (a TypeScript candidate runs anywhere: `fastkernels stubs --lang ts`)',
    });
  }
  if (compile) {
    try {
      await compile(program);
    } catch (e) {
      const log = (e as { log?: unknown }).log;
      if (typeof log === 'string') {
        throw compileErrorToUserError(log, {
          programName: sourceName,
          display,
          source,
          headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, [join(dirname(display), k), v] as const])),
        });
      }
      throw new UserError(`cannot be compiled: ${errorMessage(e)}`, { file: display, fix: 'run `fastkernels doctor` (NVRTC and the CUDA include dirs)' });
    }
  }
  return cudaCandidateClass(plan, program);
}
