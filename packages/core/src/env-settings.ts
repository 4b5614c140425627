import { UserError } from './errors.js';

/**
 * Speed settings a process may override from its environment (FASTKERNELS_PDL=0, FASTKERNELS_GEMV_MAX_ROWS=0, ...):
 * the benches flip them per run to measure each against the shipped default. A value that is not understood is an
 * error naming the variable and the fix, never a silent default.
 */
function raw(name: string): string | undefined {
  const v = typeof process !== 'undefined' ? process.env[name] : undefined;
  return v === undefined || v === '' ? undefined : v;
}

/** A 0/1 switch: unset -> fallback. */
export function envSwitch(name: string, fallback: boolean): boolean {
  const v = raw(name);
  if (v === undefined) return fallback;
  if (v === '1') return true;
  if (v === '0') return false;
  throw new UserError(`expected 0 or 1, got '${v}'`, { field: name, fix: `set ${name} to 0 or 1, or unset it for the default (${fallback ? 1 : 0})` });
}

/** A whole number in [min, max] (default: >= 0): unset -> fallback. */
export function envCount(name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const v = raw(name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
    throw new UserError(`expected a whole number ${range}, got '${v}'`, { field: name, fix: `set ${name} to a whole number ${range}, or unset it for the default (${fallback})` });
  }
  return n;
}

/** One of `choices`: unset -> fallback. */
export function envChoice<C extends string>(name: string, choices: readonly C[], fallback: C): C {
  const v = raw(name);
  if (v === undefined) return fallback;
  if ((choices as readonly string[]).includes(v)) return v as C;
  throw new UserError(`expected one of ${choices.join(', ')}, got '${v}'`, { field: name, fix: `set ${name} to one of ${choices.join(', ')}, or unset it for the default (${fallback})` });
}
