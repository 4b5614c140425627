/**
 * A tiny stand-in for `vitest`, so GPU test files run on the GPU host with nothing but node.
 * tools/gpu-tests.mjs bundles each *.gpu.test.ts with 'vitest' aliased to this file.
 * Supports describe/it/test (+ skipIf/runIf/skip), it(name, { tags }, fn), beforeAll/afterAll and the
 * matchers the GPU tests use. Tests run serially; each prints one line; run() returns the counts.
 */
import { existsSync } from 'node:fs';
import { isDeepStrictEqual, inspect } from 'node:util';

type Fn = () => unknown | Promise<unknown>;
interface TestOptions {
  tags?: string[];
  timeout?: number;
}
interface Case {
  kind: 'test';
  name: string;
  fn: Fn;
  skip?: string;
  tags: string[];
}
interface Suite {
  kind: 'suite';
  name: string;
  children: (Case | Suite)[];
  beforeAll: Fn[];
  afterAll: Fn[];
}

const root: Suite = { kind: 'suite', name: '', children: [], beforeAll: [], afterAll: [] };
let current = root;

export function describe(name: string, fn: () => void): void {
  const s: Suite = { kind: 'suite', name, children: [], beforeAll: [], afterAll: [] };
  current.children.push(s);
  const prev = current;
  current = s;
  try {
    fn();
  } finally {
    current = prev;
  }
}

function addTest(name: string, a: TestOptions | Fn | undefined, b: Fn | undefined, skip?: string): void {
  const fn = (typeof a === 'function' ? a : b) ?? (() => undefined);
  const opts = typeof a === 'object' ? a : {};
  current.children.push({ kind: 'test', name, fn, skip, tags: opts.tags ?? [] });
}

interface ItFn {
  (name: string, a?: TestOptions | Fn, b?: Fn): void;
  skip(name: string, a?: TestOptions | Fn, b?: Fn): void;
  skipIf(cond: unknown): (name: string, a?: TestOptions | Fn, b?: Fn) => void;
  runIf(cond: unknown): (name: string, a?: TestOptions | Fn, b?: Fn) => void;
}
export const it: ItFn = Object.assign((name: string, a?: TestOptions | Fn, b?: Fn) => addTest(name, a, b), {
  skip: (name: string, a?: TestOptions | Fn, b?: Fn) => addTest(name, a, b, 'skipped'),
  skipIf: (cond: unknown) => (name: string, a?: TestOptions | Fn, b?: Fn) => addTest(name, a, b, cond ? 'skipIf' : undefined),
  runIf: (cond: unknown) => (name: string, a?: TestOptions | Fn, b?: Fn) => addTest(name, a, b, cond ? undefined : 'runIf'),
});
export const test = it;

export function beforeAll(fn: Fn): void {
  current.beforeAll.push(fn);
}
export function afterAll(fn: Fn): void {
  current.afterAll.push(fn);
}

// ------------------------------------------------------------------------------------------- expect

class AssertionError extends Error {
  override name = 'AssertionError';
}
const show = (v: unknown) => inspect(v, { depth: 4, maxArrayLength: 20, breakLength: 120 });

function matchers(actual: unknown, negate: boolean) {
  const check = (ok: boolean, msg: string) => {
    if (ok === negate) throw new AssertionError(negate ? `expected NOT: ${msg}` : `expected: ${msg}`);
  };
  const num = (v: unknown) => v as number;
  return {
    toBe: (e: unknown) => check(Object.is(actual, e), `${show(actual)} to be ${show(e)}`),
    toEqual: (e: unknown) => check(isDeepStrictEqual(normalize(actual), normalize(e)), `${show(actual)} to equal ${show(e)}`),
    toStrictEqual: (e: unknown) => check(isDeepStrictEqual(actual, e), `${show(actual)} to strictly equal ${show(e)}`),
    toBeCloseTo: (e: number, digits = 2) => check(Math.abs(num(actual) - e) < 10 ** -digits / 2, `${show(actual)} to be close to ${e} (${digits} digits)`),
    toBeLessThan: (e: number) => check(num(actual) < e, `${show(actual)} < ${e}`),
    toBeLessThanOrEqual: (e: number) => check(num(actual) <= e, `${show(actual)} <= ${e}`),
    toBeGreaterThan: (e: number) => check(num(actual) > e, `${show(actual)} > ${e}`),
    toBeGreaterThanOrEqual: (e: number) => check(num(actual) >= e, `${show(actual)} >= ${e}`),
    toBeInstanceOf: (c: abstract new (...a: never[]) => unknown) => check(actual instanceof c, `${show(actual)} to be an instance of ${c.name}`),
    toMatch: (re: RegExp | string) => check(typeof actual === 'string' && (typeof re === 'string' ? actual.includes(re) : re.test(actual)), `${show(actual)} to match ${re}`),
    toContain: (e: unknown) => check(typeof actual === 'string' ? actual.includes(e as string) : Array.isArray(actual) && actual.includes(e), `${show(actual)} to contain ${show(e)}`),
    toBeTruthy: () => check(!!actual, `${show(actual)} to be truthy`),
    toBeFalsy: () => check(!actual, `${show(actual)} to be falsy`),
    toBeDefined: () => check(actual !== undefined, `${show(actual)} to be defined`),
    toBeUndefined: () => check(actual === undefined, `${show(actual)} to be undefined`),
    toBeNull: () => check(actual === null, `${show(actual)} to be null`),
    toHaveLength: (n: number) => check((actual as { length: number }).length === n, `${show(actual)} to have length ${n}`),
    toMatchObject: (e: Record<string, unknown>) =>
      check(Object.entries(e).every(([k, v]) => isDeepStrictEqual(normalize((actual as Record<string, unknown>)[k]), normalize(v))), `${show(actual)} to match object ${show(e)}`),
    toThrow: (e?: string | RegExp | (new (...a: never[]) => unknown)) => {
      let thrown: unknown;
      let did = false;
      try {
        (actual as () => unknown)();
      } catch (err) {
        did = true;
        thrown = err;
      }
      const msg = thrown instanceof Error ? thrown.message : String(thrown);
      const ok = did && (e === undefined || (typeof e === 'string' ? msg.includes(e) : e instanceof RegExp ? e.test(msg) : thrown instanceof e));
      check(ok, did ? `thrown ${show(msg)} to match ${e instanceof Function ? e.name : show(e)}` : `function to throw ${e instanceof Function ? e.name : show(e ?? '')}`);
    },
  };
}
type Matchers = ReturnType<typeof matchers>;
type Async<T> = { [K in keyof T]: T[K] extends (...a: infer A) => unknown ? (...a: A) => Promise<void> : never };

function normalize(v: unknown): unknown {
  if (ArrayBuffer.isView(v) && !(v instanceof DataView)) return Array.from(v as unknown as ArrayLike<number>);
  return v;
}

export function expect(actual: unknown): Matchers & { not: Matchers; rejects: Async<Matchers> } {
  const rejects = new Proxy({} as Async<Matchers>, {
    get: (_t, key: string) => async (...args: unknown[]) => {
      let err: unknown;
      try {
        await (actual as Promise<unknown>);
      } catch (e) {
        err = e;
        return (matchers(() => { throw e; }, false) as Record<string, (...a: unknown[]) => void>)[key]!(...args);
      }
      void err;
      throw new AssertionError('expected the promise to reject');
    },
  });
  return Object.assign(matchers(actual, false), { not: matchers(actual, true), rejects });
}

// ------------------------------------------------------------------------------------------- runner

const hasGpu = process.env.FASTKERNELS_GPU ? process.env.FASTKERNELS_GPU === '1' : existsSync('/dev/nvidiactl');
// FASTKERNELS_TEST_FILTER=substring: run only the tests whose full name (file > suites > test) contains it (the
// others are skipped and say why), so one call on the GPU host can run a single test of a long file.
const nameFilter = process.env.FASTKERNELS_TEST_FILTER || undefined;

export async function run(file: string): Promise<{ passed: number; failed: number; skipped: number }> {
  const counts = { passed: 0, failed: 0, skipped: 0 };
  const walk = async (s: Suite, path: string[]): Promise<void> => {
    for (const h of s.beforeAll) {
      try {
        await h();
      } catch (e) {
        counts.failed++;
        console.log(`FAIL ${[file, ...path, '(beforeAll)'].join(' > ')}\n${indent(e)}`);
        return;
      }
    }
    for (const c of s.children) {
      if (c.kind === 'suite') {
        await walk(c, [...path, c.name]);
        continue;
      }
      const name = [file, ...path, c.name].join(' > ');
      const skip =
        c.skip ??
        (c.tags.includes('gpu') && !hasGpu ? 'no NVIDIA GPU (/dev/nvidiactl absent; FASTKERNELS_GPU=1 forces)' : undefined) ??
        (nameFilter && !name.includes(nameFilter) ? `FASTKERNELS_TEST_FILTER=${nameFilter}` : undefined);
      if (skip) {
        counts.skipped++;
        console.log(`skip ${name} (${skip})`);
        continue;
      }
      const t0 = performance.now();
      try {
        await c.fn();
        counts.passed++;
        console.log(`ok   ${name} (${(performance.now() - t0).toFixed(0)} ms)`);
      } catch (e) {
        counts.failed++;
        console.log(`FAIL ${name} (${(performance.now() - t0).toFixed(0)} ms)\n${indent(e)}`);
      }
    }
    for (const h of s.afterAll) {
      try {
        await h();
      } catch (e) {
        counts.failed++;
        console.log(`FAIL ${[file, ...path, '(afterAll)'].join(' > ')}\n${indent(e)}`);
      }
    }
  };
  await walk(root, []);
  console.log(`gpu-tests-file: ${file}: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
  return counts;
}

function indent(e: unknown): string {
  const s = e instanceof Error ? (e.stack ?? e.message) : String(e);
  return s.split('\n').slice(0, 25).map((l) => `     ${l}`).join('\n');
}
