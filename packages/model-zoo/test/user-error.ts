import { UserError } from '@fastkernels/core';
import { expect } from 'vitest';

/** The UserError `fn` throws (a test failure when it throws anything else, or nothing). */
export function userError(fn: () => unknown): UserError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(UserError);
    return e as UserError;
  }
  throw new Error('expected a UserError');
}
