/**
 * Every `fastkernels <command> --flag ...` hint in the packages' messages names a command and flags that exist, so
 * that it runs as written (the CLI rewrites the name itself to how it was started: see packages/cli/src/invocation.ts).
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, cli } from './helpers.js';

function sources(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) {
      if (name !== 'fixtures' && name !== 'node_modules') sources(p, out);
    } else if (name.endsWith('.ts') && !name.endsWith('.test.ts') && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

interface Hint {
  readonly where: string;
  readonly command: string;
  readonly flags: string[];
}

/** `fastkernels launch --nproc 2 -- fastkernels bench --tp 2`: both commands, each with its flags. */
function parseHint(text: string, where: string): Hint[] {
  const m = /^fastkernels ([a-z][a-z0-9-]*)(.*)$/s.exec(text);
  if (!m) return [];
  const [own, inner] = m[2]!.split(/ -- /, 2);
  const flags = [...(own ?? '').matchAll(/(?:^|\s|\[)--([a-z][a-z0-9-]*)/g)].map((f) => f[1]!);
  return [{ where, command: m[1]!, flags }, ...(inner ? parseHint(inner.trim(), where) : [])];
}

const hints: Hint[] = [];
for (const pkg of readdirSync(join(ROOT, 'packages'))) {
  const src = join(ROOT, 'packages', pkg, 'src');
  for (const file of sources(src)) {
    const text = readFileSync(file, 'utf8');
    // a command word then a space or the closing backquote: `fastkernels bench: …` is an output prefix, not a hint
    for (const m of text.matchAll(/`(fastkernels [a-z][a-z0-9-]*(?:[ \\][^`]*)?)`/g)) {
      const line = text.slice(0, m.index).split('\n').length;
      hints.push(...parseHint(m[1]!.replace(/\\$/, ''), `${relative(ROOT, file)}:${line}`));
    }
  }
}

describe("the CLI's `fastkernels …` hints", () => {
  const help = new Map<string, string>();
  const helpOf = (command: string) => {
    if (!help.has(command)) help.set(command, cli([command, '--help']).stdout);
    return help.get(command)!;
  };

  it('were found (the scan works)', () => {
    expect(hints.length).toBeGreaterThan(30);
    expect(hints.some((h) => h.command === 'bench' && h.flags.includes('results'))).toBe(true);
  });

  it('name commands that exist, with flags those commands take', () => {
    const commands = new Set([...cli(['--help']).stdout.matchAll(/^ {2}node \S+bin\.js ([a-z][a-z0-9-]*)\b/gm)].map((m) => m[1]!));
    expect(commands.has('bench') && commands.has('list')).toBe(true);
    const wrong: string[] = [];
    for (const h of hints) {
      if (h.command === '__worker') continue; // the hidden worker entry (named in a comment of bench/worker.ts)
      if (!commands.has(h.command)) {
        wrong.push(`${h.where}: \`fastkernels ${h.command}\` is no command`);
        continue;
      }
      for (const f of h.flags) if (!new RegExp(`--${f}\\b`).test(helpOf(h.command))) wrong.push(`${h.where}: \`fastkernels ${h.command}\` has no --${f}`);
    }
    expect(wrong).toEqual([]);
  });
});
