import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { unknownCommand } from './app.js';
import { invocationName, withInvocation } from './invocation.js';

const COMMANDS = ['list', 'info', 'stubs', 'bench', 'merge', 'doctor', 'generate', 'init-weights', 'e2e', 'capture', 'serve', 'launch', 'score', 'leaderboard'];

describe('invocationName: hints name the CLI as the user started it', () => {
  const root = mkdtempSync(join(tmpdir(), 'fk-inv-'));
  const bin = join(root, 'packages/cli/dist/bin.js');
  mkdirSync(join(root, 'packages/cli/dist'), { recursive: true });
  writeFileSync(bin, '');
  const dotBin = join(root, 'node_modules/.bin/fastkernels');

  it('npx fastkernels (npm exec sets npm_lifecycle_event=npx and the command line)', () => {
    expect(invocationName(dotBin, { npm_lifecycle_event: 'npx', npm_lifecycle_script: "'fastkernels'", PATH: '/usr/bin' }, root)).toBe('npx fastkernels');
    // `npx vitest` spawning the CLI by path: the inherited npx variables name vitest, not us
    expect(invocationName(bin, { npm_lifecycle_event: 'npx', npm_lifecycle_script: 'vitest run', PATH: '/usr/bin' }, root)).toBe('node packages/cli/dist/bin.js');
  });

  it('the node_modules/.bin link: plain when its folder is on PATH, npx otherwise', () => {
    expect(invocationName(dotBin, { PATH: `/usr/bin:${join(root, 'node_modules/.bin')}` }, root)).toBe('fastkernels');
    expect(invocationName('/usr/local/bin/fastkernels', { PATH: '/usr/local/bin' }, root)).toBe('fastkernels');
    expect(invocationName(dotBin, { PATH: '/usr/bin' }, root)).toBe('npx fastkernels');
  });

  it('by path: node and the path, relative to the working folder when inside it', () => {
    expect(invocationName(bin, { PATH: '/usr/bin' }, root)).toBe('node packages/cli/dist/bin.js');
    expect(invocationName(bin, { PATH: '/usr/bin' }, join(root, 'elsewhere'))).toBe(`node ${bin}`);
  });

  it("the GPU host bundle: its run script", () => {
    const dir = join(root, 'dist/gpu-host');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'fastkernels.mjs'), '');
    writeFileSync(join(dir, 'run'), '');
    expect(invocationName(join(dir, 'fastkernels.mjs'), { PATH: '/usr/bin' }, root)).toBe('dist/gpu-host/run');
    expect(invocationName(join(dir, 'fastkernels.mjs'), { PATH: '/usr/bin' }, dir)).toBe('./run');
  });

  it('withInvocation rewrites the backquoted hints only', () => {
    const msg = 'fastkernels: error: unknown task\nfix: run `fastkernels list` (or `fastkernels info <task>`)';
    expect(withInvocation(msg, 'npx fastkernels')).toBe('fastkernels: error: unknown task\nfix: run `npx fastkernels list` (or `npx fastkernels info <task>`)');
    expect(withInvocation(msg, 'fastkernels')).toBe(msg);
  });
});

describe('unknownCommand: the closest command, and the list', () => {
  it('typos, other words for a command, and nonsense', () => {
    expect(unknownCommand(['benhc'], COMMANDS)).toMatch(/^unknown command 'benhc'\. Did you mean `fastkernels bench`\? The commands: list, info, /);
    expect(unknownCommand(['lst'], COMMANDS)).toContain('Did you mean `fastkernels list`?');
    expect(unknownCommand(['benchmark', '--candidates', 'x'], COMMANDS)).toContain('Did you mean `fastkernels bench`?');
    expect(unknownCommand(['tasks'], COMMANDS)).toContain('Did you mean `fastkernels list`?');
    expect(unknownCommand(['frobnicate'], COMMANDS)).toBe(`unknown command 'frobnicate'. The commands: ${COMMANDS.join(', ')}`);
  });

  it('a known command, --help and --version pass; flags alone ask for a command', () => {
    expect(unknownCommand(['bench', '--candidates', 'x'], COMMANDS)).toBeUndefined();
    expect(unknownCommand(['--verbose', 'list'], COMMANDS)).toBeUndefined();
    expect(unknownCommand(['--help'], COMMANDS)).toBeUndefined();
    expect(unknownCommand(['--version'], COMMANDS)).toBeUndefined();
    expect(unknownCommand([], COMMANDS)).toMatch(/^no command given\. The commands: list/);
    expect(unknownCommand(['--verbose'], COMMANDS)).toMatch(/^no command given/);
  });
});
