import { UserError } from '@fastkernels/core';

/** An integer flag within [min, max], or a UserError naming the flag and the range. */
export function intFlag(name: string, value: unknown, min: number, max: number): number {
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new UserError(`must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`, { field: `--${name}`, fix: `pass --${name} N with ${min} <= N <= ${max}` });
  }
  return n;
}

export function levelFlag(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  return intFlag('level', value, 1, 4);
}

/** A flag given as one string or several (--task a --task b, or --task a,b). */
export function listFlag(value: unknown): string[] {
  if (value === undefined) return [];
  const arr = Array.isArray(value) ? value : [value];
  return arr.flatMap((v) => String(v).split(',')).map((s) => s.trim()).filter(Boolean);
}
