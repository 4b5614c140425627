#!/usr/bin/env node
import { main } from './app.js';

process.exitCode = await main(process.argv.slice(2));
// A rank of `fastkernels launch` (e.g. `generate --tp N`) must end when its command has: should a native handle
// (CUDA, NCCL) keep the event loop alive, leave after a grace period for stdout to drain. Unref'd: it never delays
// a normal exit.
if (process.env.FASTKERNELS_RDZV_TOKEN) setTimeout(() => process.exit(), 5000).unref();
