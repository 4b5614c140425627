#!/usr/bin/env node
import { UserError } from '@fastkernels/core';
import { reportUserError } from './exit-codes.js';

// app.js is imported here rather than statically: modules read their FASTKERNELS_* speed settings as they load
// (launch-tuning, linear), and a bad value must come out as the CLI's one-line error, not an import-time stack trace.
let app: typeof import('./app.js');
try {
  app = await import('./app.js');
} catch (e) {
  if (!(e instanceof UserError)) throw e;
  process.exit(reportUserError(e, (t) => process.stderr.write(t), process.argv.includes('--verbose')));
}
process.exitCode = await app.main(process.argv.slice(2));
// A rank of `fastkernels launch` (e.g. `generate --tp N`) must end when its command has: should a native handle
// (CUDA, NCCL) keep the event loop alive, leave after a grace period for stdout to drain. Unref'd: it never delays
// a normal exit.
if (process.env.FASTKERNELS_RDZV_TOKEN) setTimeout(() => process.exit(), 5000).unref();
