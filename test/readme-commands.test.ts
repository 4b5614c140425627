/**
 * Every CPU command of README.md runs as written.
 *
 * The convention (README writers: keep to it):
 *  - Only fenced blocks opened with ```bash are read. A line ending in `\` continues on the next one.
 *  - Leading `npm ci &&` / `npm run build &&` steps are dropped (CI has done both before the tests).
 *  - What is left runs when it starts with `npx fastkernels ` or `node packages/cli/dist/bin.js `, unless the line
 *    carries a `# gpu` comment (needs an NVIDIA GPU) or a `# no-test` comment (never ends, e.g. `serve`, or needs
 *    something CI does not have). A trailing `# ...` comment is not part of the command.
 *  - The lines of a block run in order (a later line may use what an earlier one wrote), in a scratch folder that
 *    links the checkout's top-level entries, so relative paths such as examples/... resolve and files the commands
 *    write stay out of the checkout. Each must exit 0 within 120 s.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from './helpers.js';

export interface ReadmeCommand {
  readonly line: number;
  readonly command: string;
}

const RUNNABLE = /^(npx fastkernels|node packages\/cli\/dist\/bin\.js)(\s|$)/;
const SETUP = /^(npm ci|npm run build)(\s+[^&|;]*)?\s*&&\s*/;

/** The runnable commands of each ```bash block, in order (one array per block). */
export function readmeCommands(markdown: string): ReadmeCommand[][] {
  const blocks: ReadmeCommand[][] = [];
  const lines = markdown.split('\n');
  let block: ReadmeCommand[] | undefined;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    if (/^\s*```/.test(raw)) {
      if (block) {
        blocks.push(block);
        block = undefined;
      } else if (/^\s*```bash\s*$/.test(raw)) block = [];
      else for (i++; i < lines.length && !/^\s*```/.test(lines[i]!); i++); // another language: skip the block
      continue;
    }
    if (!block) continue;
    const start = i + 1;
    let text = raw;
    while (/\\\s*$/.test(text) && i + 1 < lines.length) text = `${text.replace(/\s*\\\s*$/, ' ')}${lines[++i]!.trim()}`;
    const comment = /\s#\s.*$|^\s*#.*$/.exec(text)?.[0] ?? '';
    if (/#\s*(gpu|no-test)\b/.test(comment)) continue;
    let command = text.slice(0, text.length - comment.length).trim();
    while (SETUP.test(command)) command = command.replace(SETUP, '');
    if (RUNNABLE.test(command)) block.push({ line: start, command });
  }
  return blocks.filter((b) => b.length);
}

describe('readmeCommands (the convention)', () => {
  it('takes the fastkernels lines of bash blocks, drops set-up steps, skips # gpu / # no-test and other languages', () => {
    const md = [
      '```bash',
      'npm ci && npm run build && npx fastkernels list          # the tasks',
      'npx fastkernels bench --backend cuda --candidates x    # gpu',
      'npx fastkernels serve --model m                        # no-test: never ends',
      'node packages/cli/dist/bin.js stubs --out k \\',
      '  --task rms_norm',
      'npx vitest run',
      'dist/gpu-host/run doctor',
      '```',
      '```sh',
      'npx fastkernels doctor',
      '```',
      '```bash',
      'npm ci',
      '```',
    ].join('\n');
    expect(readmeCommands(md)).toEqual([[
      { line: 2, command: 'npx fastkernels list' },
      { line: 5, command: 'node packages/cli/dist/bin.js stubs --out k --task rms_norm' },
    ]]);
  });
});

describe('README.md commands run as written (CPU)', () => {
  const blocks = readmeCommands(readFileSync(join(ROOT, 'README.md'), 'utf8'));

  it('the README has CPU commands (at least the main job)', () => {
    expect(blocks.flat().length).toBeGreaterThan(0);
  });

  for (const block of blocks) {
    it(`README.md:${block[0]!.line}: ${block.map((c) => c.command).join(' ; ')}`, () => {
      const scratch = mkdtempSync(join(tmpdir(), 'fk-readme-'));
      for (const name of readdirSync(ROOT)) if (name !== '.git') symlinkSync(join(ROOT, name), join(scratch, name));
      for (const c of block) {
        const r = spawnSync('sh', ['-c', c.command], {
          cwd: scratch, encoding: 'utf8', timeout: 120_000,
          // offline: `npx fastkernels` must find the checkout's bin, never ask the registry
          env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1', npm_config_offline: 'true' },
        });
        expect(r.status, `README.md:${c.line}: ${c.command}\n${r.stderr}`).toBe(0);
      }
    }, 300_000);
  }
});
