import { existsSync } from 'node:fs';
import { basename, delimiter, dirname, isAbsolute, join, relative, resolve } from 'node:path';

/**
 * How the user started this CLI, so that the `fastkernels …` hints it prints run as written: `npx fastkernels` in a
 * checkout (the bin is linked into node_modules/.bin, which is not on PATH), `node packages/cli/dist/bin.js` when run
 * by path, `dist/gpu-host/run` for the GPU host's bundle, plain `fastkernels` when it is on PATH (a global install).
 */
export function invocationName(argv1: string | undefined = process.argv[1], env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  // npx / npm exec run the bin with npm_lifecycle_event=npx and the (quoted) command in npm_lifecycle_script (both are
  // inherited by children, hence the script check: `npx vitest` spawning the CLI is not an npx fastkernels).
  if (env.npm_lifecycle_event === 'npx' && /^['"]?fastkernels(['"\s]|$)/.test(env.npm_lifecycle_script ?? '')) return 'npx fastkernels';
  if (!argv1) return 'fastkernels';
  if (basename(argv1) === 'fastkernels') {
    const onPath = (env.PATH ?? '').split(delimiter).some((d) => d && resolve(d) === resolve(dirname(argv1)));
    return onPath ? 'fastkernels' : 'npx fastkernels';
  }
  const shown = (p: string) => {
    const rel = relative(cwd, p);
    return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : p;
  };
  // Run by path: the package's dist/bin.js or its bin wrapper.
  if (/(dist[/\\]bin|bin[/\\]fastkernels)\.js$/.test(argv1) && existsSync(argv1)) return `node ${shown(argv1)}`;
  // The GPU host's bundle: its `run` script starts fastkernels.mjs on the bundled node.
  if (basename(argv1) === 'fastkernels.mjs' && existsSync(join(dirname(argv1), 'run'))) {
    const run = shown(join(dirname(argv1), 'run'));
    return run.includes('/') ? run : `./${run}`;
  }
  return 'fastkernels';
}

/** Rewrites the backquoted `fastkernels …` hints of a message to the name the user typed. */
export function withInvocation(text: string, name: string): string {
  return name === 'fastkernels' ? text : text.replaceAll('`fastkernels ', `\`${name} `);
}
