// The GPU host runs the GPU tests under the real vitest (tools/gpu-tests.mjs): the closure it ships must hold what
// vitest loads there, and the reporter must print the lines bench/suites/verify/run.sh reads and the closing line.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GpuTestsReporter, NO_GPU, hasGpu } from '../tools/gpu-tests-reporter.mjs';
import { vitestClosure } from '../tools/gpu-tests.mjs';

const root = resolve(import.meta.dirname, '..');

describe('tools/gpu-tests.mjs: the vitest closure', () => {
  it('holds vitest, vite, the runner and the linux-x64 rolldown binding, each once, and leaves out types and lightningcss', () => {
    const dirs = vitestClosure();
    for (const p of ['node_modules/vitest', 'node_modules/vite', 'node_modules/@vitest/runner', 'node_modules/@vitest/expect', 'node_modules/rolldown', 'node_modules/@rolldown/binding-linux-x64-gnu']) {
      expect(dirs).toContain(p);
    }
    expect(dirs.filter((d) => /@types\/|lightningcss/.test(d))).toEqual([]);
    expect(new Set(dirs).size).toBe(dirs.length);
    expect(dirs.filter((d) => dirs.some((o) => d.startsWith(`${o}/`)))).toEqual([]); // nested ones travel in their parent
    for (const d of dirs) expect(existsSync(join(root, d, 'package.json')), d).toBe(true);
  });
});

describe('tools/gpu-tests-reporter.mjs', () => {
  const lines: string[] = [];
  beforeEach(() => {
    lines.length = 0;
    vi.spyOn(console, 'log').mockImplementation((m: string) => void lines.push(...String(m).split('\n')));
  });
  afterEach(() => vi.restoreAllMocks());

  const mod = { relativeModuleId: 'backend-cuda--fatal.test.mjs' };
  const test = (name: string, state: string, extra: { tags?: string[]; errors?: unknown[]; note?: string } = {}) => ({
    module: mod,
    fullName: `sticky errors > ${name}`,
    tags: extra.tags ?? [],
    options: {},
    result: () => ({ state, errors: extra.errors, note: extra.note }),
    diagnostic: () => (state === 'skipped' ? undefined : { duration: 12.4 }),
  });

  it('prints one line a test in the format verify reads, the per-file counts, and the totals last', () => {
    const r = new GpuTestsReporter();
    const tests = [test('passes', 'passed'), test('fails', 'failed', { errors: [new Error('boom')] }), test('on the GPU', 'skipped', { tags: ['gpu'] })];
    for (const t of tests) r.onTestCaseResult(t);
    r.onTestModuleEnd({ ...mod, errors: () => [], children: { allTests: () => tests } });
    expect(lines[0]).toBe('ok   backend-cuda--fatal.test.mjs > sticky errors > passes (12 ms)');
    expect(lines[1]).toBe('FAIL backend-cuda--fatal.test.mjs > sticky errors > fails (12 ms)');
    expect(lines[2]).toMatch(/^ {5}Error: boom$/);
    const skip = lines.find((l) => l.startsWith('skip '));
    expect(skip).toBe(`skip backend-cuda--fatal.test.mjs > sticky errors > on the GPU (${hasGpu ? 'skipped' : NO_GPU})`);
    expect(lines.at(-1)).toBe('gpu-tests-file: backend-cuda--fatal.test.mjs: 1 passed, 1 failed, 1 skipped');
    // the same regular expressions bench/suites/verify/run.sh applies to the log
    expect(lines.at(-1)).toMatch(/^gpu-tests-file: .*: (\d+) passed, (\d+) failed, (\d+) skipped$/);
    expect(lines[0]).toMatch(/^(ok {2}|FAIL|skip) (.+?)(?: \((\d+) ms\))?$/);
  });

  it('counts a file that did not load, and errors outside any test, as failures in the closing line', () => {
    const r = new GpuTestsReporter();
    r.onTestModuleEnd({ ...mod, errors: () => [new Error('SyntaxError: bad bundle')], children: { allTests: () => [] } });
    expect(lines).toContain('gpu-tests-file: backend-cuda--fatal.test.mjs: 0 passed, 1 failed, 0 skipped');
    const exit: (() => void)[] = [];
    const on = vi.spyOn(process, 'on').mockImplementation(((ev: string, f: () => void) => (ev === 'exit' && exit.push(f), process)) as typeof process.on);
    const write = vi.spyOn(process.stdout, 'write').mockImplementation(((s: string) => (lines.push(s.trimEnd()), true)) as typeof process.stdout.write);
    r.onTestRunEnd([], [new Error('unhandled')]);
    on.mockRestore(); // the reporter's exit handler was captured, not registered
    for (const f of exit) f();
    write.mockRestore();
    expect(lines.at(-1)).toBe('gpu-tests: 0 passed, 2 failed');
  });
});
