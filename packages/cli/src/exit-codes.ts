import type { UserError } from '@fastkernels/core';

/** Exit codes: 0 the command completed (a bench run with failing candidates included), 1 an internal error, 2 bad input. */
export const EXIT_OK = 0;
export const EXIT_INTERNAL = 1;
export const EXIT_USAGE = 2;
export const EXIT_INTERRUPTED = 130;

/** Bad input's one line (the field and the fix; the stack only with --verbose). Returns the exit code. */
export function reportUserError(e: UserError, write: (s: string) => void, verbose: boolean): number {
  write(`fastkernels: error: ${e.describe()}\n`);
  if (verbose && e.stack) write(`${e.stack}\n`);
  return EXIT_USAGE;
}
