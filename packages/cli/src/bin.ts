#!/usr/bin/env node
import { setting } from '@fastkernels/core';
import { main } from './app.js';

// Nothing reads FASTKERNELS_* settings as it loads (core/settings.ts: read when used), so a bad value comes out of main()
// as the CLI's one-line error.
process.exitCode = await main(process.argv.slice(2));
// A rank of `fastkernels launch` (e.g. `generate --tp N`) must end when its command has: should a native handle
// (CUDA, NCCL) keep the event loop alive, leave after a grace period for stdout to drain. Unref'd: it never delays
// a normal exit.
if (setting('FASTKERNELS_RDZV_TOKEN')) setTimeout(() => process.exit(), 5000).unref();
