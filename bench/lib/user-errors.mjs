// Imported first by every bench script (before the packages, whose modules read their FASTKERNELS_* speed settings
// as they load): a UserError — a bad FASTKERNELS_* value, a bad flag — ends the process with one line naming the
// setting and the fix, exit 2, as the CLI does (packages/cli/src/bin.ts), instead of an import-time stack trace.
import { UserError } from '@fastkernels/core';

process.on('uncaughtException', (e) => {
  if (e instanceof UserError) {
    process.stderr.write(`${process.argv[1]?.split('/').pop() ?? 'bench'}: error: ${e.describe()}\n`);
    process.exit(2);
  }
  process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
