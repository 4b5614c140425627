/**
 * What the e2e and capture tests (e2e*.test.ts, capture*.test.ts) set up alike: the tiny model folders, a temporary
 * folder removed after the file's tests, an Io that keeps what it prints, candidate files written to a folder, CPU
 * arguments small enough for the tiny models, and the check that a capture's cases build as `bench --captures`
 * builds them. A *.suite.ts file: shared by tests, never built into the package.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, expect } from 'vitest';
import { capturedCasesFor, loadCaptures } from '../bench/captures.js';
import { environment } from '../env.js';
import type { Io } from '../io.js';
import type { CaptureArgs } from './capture.js';
import type { E2eArgs } from './e2e.js';

export const ROOT = resolve(import.meta.dirname, '../../../..');

/** A tiny model folder of model-zoo's fixtures (tiny-llama, tiny-flux, tiny-yolov10, tiny-bge-m3, ...). */
export function fixture(name: string): string {
  return join(ROOT, 'packages/model-zoo/fixtures', name);
}

/** A temporary folder, removed after the calling file's tests. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** An Io that keeps what is printed. */
export function recordingIo(): Io & { stdout: string; stderr: string } {
  const o = { stdout: '', stderr: '', out: (t: string) => void (o.stdout += t), err: (t: string) => void (o.stderr += t) };
  return o;
}

/** Writes files (path relative to `dir` -> text), e.g. a candidate folder's L<level>/<task stem>.ts; returns `dir`. */
export function writeFiles(dir: string, files: Record<string, string>): string {
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  return dir;
}

/**
 * The source of a wrong candidate: `cls` extends `base` and adds `addend` to its output. `imports` brings `base` in;
 * `ctor` is the constructor's parameter list and super arguments where the baseline's must be spelt out.
 */
export function offsetCandidate(o: { cls: string; base: string; imports: string; addend: string; ctor?: { params: string; args: string } }): string {
  const ctor = o.ctor ? `  constructor(${o.ctor.params}) {\n    super(${o.ctor.args});\n  }\n` : '';
  return `import { OpScope, type Tensor } from '@fastkernels/core';
${o.imports}
export class ${o.cls} extends ${o.base} {
${ctor}  override forward(x: Tensor): Tensor {
    const s = new OpScope();
    const y = s.own(super.forward(x));
    return s.keep([s.op('add', [y, ${o.addend}])])[0]!;
  }
}
`;
}

/** e2e on the CPU with small engine and LLM workload settings (the folder runners ignore the LLM ones); `over` wins. */
export function cpuE2eArgs(model: string, over: Partial<E2eArgs> = {}): E2eArgs {
  return {
    model, backend: 'cpu', maxNumSeqs: 4, maxNumBatchedTokens: 32, gpuMemoryUtilization: 0.9, graphs: true, workload: 'all',
    requests: 'synthetic:1:1-1:1-1:0', latencyBatchSizes: '1', latencyPrompt: 8, latencyOutput: 3, warmups: 1, repeats: 3, timeout: 600,
    ...over,
  };
}

/** capture on the CPU into `out` with a one-request LLM workload (the folder runners ignore it); `over` wins. */
export function cpuCaptureArgs(model: string, out: string, over: Partial<CaptureArgs> = {}): CaptureArgs {
  return { model, out, workload: 'synthetic:1:1-1:1-1:0', backend: 'cpu', ...over } as CaptureArgs;
}

/** Every task of the capture in `out` builds cases as `bench --captures` builds them; returns the index's workload and task ids. */
export function expectCasesBuild(out: string): { workload: string; ids: string[] } {
  const caps = loadCaptures(out);
  const index = caps.indexes[0]!.index;
  const ids = Object.keys(index.tasks);
  const env = environment();
  for (const id of ids) expect(capturedCasesFor(env.taskMap.get(id)!, caps, 64).length, id).toBeGreaterThan(0);
  return { workload: index.workload, ids };
}
