import { readFileSync } from 'node:fs';

/** The CLI's version: from its package.json (package layout), or the one stamped into a bundle. */
export function cliVersion(): string {
  const stamped = (globalThis as { __FASTKERNELS_VERSION__?: string }).__FASTKERNELS_VERSION__;
  if (stamped) return stamped;
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0-unknown';
  }
}
