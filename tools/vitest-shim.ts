/**
 * The 'vitest' the bundled GPU tests import (tools/gpu-tests.mjs points their `vitest` imports here): the real vitest,
 * except in a child process a test starts (FK_GPU_TEST_CHILD). Such a child imports the bundled test file itself for
 * its exports (`fk`, the NCCL rank scenarios), and outside a vitest run `describe`/`it` throw, so there they are
 * no-ops that accept any chain (`it.skipIf(c)(...)`, `describe.each`...).
 */
import * as real from 'vitest';

const child = Boolean(process.env.FK_GPU_TEST_CHILD);
type Any = (...args: unknown[]) => unknown;
const noop: Any = new Proxy(function noop() {}, { get: () => noop, apply: () => undefined }) as Any;
const pick = <T>(f: T): T => (child ? (noop as unknown as T) : f);

export const describe = pick(real.describe);
export const it = pick(real.it);
export const test = pick(real.test);
export const beforeAll = pick(real.beforeAll);
export const afterAll = pick(real.afterAll);
export const beforeEach = pick(real.beforeEach);
export const afterEach = pick(real.afterEach);
export const expect = real.expect;
export const vi = real.vi;
