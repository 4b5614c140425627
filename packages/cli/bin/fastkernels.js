#!/usr/bin/env node
// The `fastkernels` command. A committed file rather than dist/bin.js itself: npm links a bin (and sets its execute
// bit) at install time, before the build has written dist/, and tsc writes dist/bin.js without the execute bit, so a
// bin pointing into dist/ failed with "Permission denied" after a second `npm ci`.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = new URL('../dist/bin.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  process.stderr.write(
    `fastkernels: error: the CLI is not built (${fileURLToPath(entry)} is missing)\n` +
      'fix: run `npm run build` at the repository root (after `npm ci`)\n',
  );
  process.exit(2);
}
await import(entry.href);
