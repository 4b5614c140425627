/**
 * What a new user hit on a fresh clone (issue 27 §7), each as the user met it: through the built CLI, from the
 * repository root.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BenchReportSchema } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { BIN, DEMO, ROOT, STACK, cli, tempSet } from './helpers.js';

/** How the CLI's hints name it when run as `node packages/cli/dist/bin.js` from the repository root. */
const AS_RUN = `node ${relative(ROOT, BIN)}`;

describe('npx fastkernels runs the local CLI', () => {
  it('the root depends on the workspace CLI, so npm links its bin into node_modules/.bin', () => {
    const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    expect(root.devDependencies['@fastkernels/cli']).toBe('*'); // "*": any version is the workspace's (a pinned one would go stale at the next release)
    const link = join(ROOT, 'node_modules/.bin/fastkernels');
    expect(existsSync(link), 'node_modules/.bin/fastkernels is missing: run npm ci').toBe(true);
    expect(realpathSync(link)).toBe(join(ROOT, 'packages/cli/bin/fastkernels.js'));
  });

  it('npx --no-install fastkernels --help answers from the checkout (no registry)', () => {
    const r = spawnSync('npx', ['--no-install', 'fastkernels', '--help'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, npm_config_offline: 'true' } });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^npx fastkernels <command> \[options\]/); // and its hints say npx fastkernels too
  });

  it('the bin is a committed, executable wrapper (tsc writes dist/bin.js without the execute bit)', () => {
    const bin = join(ROOT, 'packages/cli/bin/fastkernels.js');
    expect(statSync(bin).mode & 0o111).toBe(0o111);
    // git keeps the bit, so a fresh clone (and any npm ci) has it (checked where the tests run in a git checkout)
    const staged = spawnSync('git', ['ls-files', '-s', 'packages/cli/bin/fastkernels.js'], { cwd: ROOT, encoding: 'utf8' }).stdout ?? '';
    if (staged) expect(staged).toMatch(/^100755 /);
    const pkg = JSON.parse(readFileSync(join(ROOT, 'packages/cli/package.json'), 'utf8')) as { version: string; bin: Record<string, string>; files: string[] };
    expect(pkg.bin).toEqual({ fastkernels: './bin/fastkernels.js' });
    expect(pkg.files).toContain('bin');
    const r = spawnSync(bin, ['--version'], { encoding: 'utf8' }); // run directly: the shebang and the x bit
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe(pkg.version);
  });

  it('before the build, the bin says to build (exit 2), not a module-not-found trace', () => {
    const dir = tempSet();
    mkdirSync(join(dir, 'bin'));
    copyFileSync(join(ROOT, 'packages/cli/bin/fastkernels.js'), join(dir, 'bin/fastkernels.js'));
    writeFileSync(join(dir, 'package.json'), '{"type":"module"}\n');
    const r = spawnSync(process.execPath, [join(dir, 'bin/fastkernels.js'), 'list'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/the CLI is not built \(.*dist\/bin\.js is missing\)\nfix: run `npm run build`/);
    expect(r.stderr).not.toMatch(STACK);
  });
});

describe('usage errors a newcomer makes: exit 2, what is wrong and the fix', () => {
  it('generate without a prompt names the flags (it was an internal error, exit 1)', () => {
    const r = cli(['generate', '--model', 'no-such-model']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--prompt-ids: no prompt given\nfix: give one prompt as --prompt "text" .*or --prompt-ids 1,2,3, or several as --prompt-file prompts\.jsonl/);
    expect(r.stderr).not.toMatch(/internal error|report it/);
  });

  it('an unknown command suggests the closest one and lists them', () => {
    const r = cli(['benchmark', '--candidates', DEMO]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`unknown command 'benchmark'. Did you mean \`${AS_RUN} bench\`?`);
    expect(r.stderr).toMatch(/The commands: list, info, stubs, bench, /);
    const far = cli(['frobnicate']);
    expect([far.code, far.stderr]).toEqual([2, expect.stringMatching(/unknown command 'frobnicate'\. The commands: /)]);
  });

  it('a misspelt flag suggests the closest flag of that command', () => {
    const r = cli(['bench', '--candidatse', DEMO]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^fastkernels: error: Unknown argument: candidatse\. Did you mean --candidates\?\n/);
    expect(cli(['list', '--bogus']).stderr).toMatch(/^fastkernels: error: Unknown argument: bogus\n/); // nothing close: no guess
  });

  it('hints name the CLI as it was started, so they run as written', () => {
    const r = cli(['info', 'L1/nope']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`\`${AS_RUN} list\``);
    expect(cli(['list']).stdout).toContain(`\`${AS_RUN} info <task>\` shows one task's interface`); // text on stdout too
    expect(cli(['list', '--json']).stdout).not.toContain(AS_RUN); // never JSON
  });

  it('stubs --help has no literal $0', () => {
    const r = cli(['stubs', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain('$0');
    expect(r.stdout).toMatch(/then `node\s/); // the name as run (the help's columns wrap the rest)
  });

  it("score --help's examples name files that exist, and the first one runs", () => {
    const help = cli(['score', '--help']).stdout;
    const files = [...help.replace(/\n\s+/g, ' ').matchAll(/(?:=|\s)(packages\/macroeval\/fixtures\/[\w*.-]+\.json)/g)].map((m) => m[1]!);
    expect(files.length).toBeGreaterThanOrEqual(4);
    for (const f of files) {
      const [dir, glob] = [f.slice(0, f.lastIndexOf('/')), f.slice(f.lastIndexOf('/') + 1)];
      const re = new RegExp(`^${glob.replace(/\./g, '\\.').replace(/\*/g, '.*')}$`);
      expect(readdirSync(join(ROOT, dir)).some((n) => re.test(n)), f).toBe(true);
    }
    const out = join(tempSet(), 'board.json');
    const r = cli(['score', '--kernel', 'Atlas:ind=packages/macroeval/fixtures/kernel-atlas-ind.json', 'Atlas:comp=packages/macroeval/fixtures/kernel-atlas-comp.json',
      '--e2e', 'Atlas:ind=packages/macroeval/fixtures/e2e-atlas-ind.json', '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    expect(help).toContain('--kernel Atlas:ind=packages/macroeval/fixtures/kernel-atlas-ind.json');
    expect(existsSync(out)).toBe(true);
  });

  it('`list | head` stops quietly (no EPIPE trace)', () => {
    const r = spawnSync('sh', ['-c', `"${process.execPath}" "${BIN}" list | head -1`], { cwd: ROOT, encoding: 'utf8' });
    expect(r.stdout).toMatch(/^task\s+level/);
    expect(r.stderr).toBe('');
  });
});

describe('bench output a newcomer reads', () => {
  it('the main job says which of its failures are deliberate', () => {
    const r = cli(['bench', '--candidates', DEMO, '--iters', '3']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/declared outcomes \(an `Expected: STATUS` line in the candidate file's header comment\):\n {2}L1\/embedding +RUNTIME_ERROR +as declared: wrong on purpose/);
    expect(r.stdout).toMatch(/L1\/silu_and_mul +INCORRECT_NUMERICAL +as declared: wrong on purpose/);
    expect(r.stdout).toMatch(/L1\/rms_norm +PASSED +as declared\n/);
  });

  it('--resume says how many tasks it reused and that it repaired a torn line (stderr and the JSON report)', () => {
    const dir = tempSet();
    const results = join(dir, 'run.jsonl');
    const first = cli(['bench', '--candidates', DEMO, '--iters', '0', '--results', results]);
    expect(first.code, first.stderr).toBe(0);
    const text = readFileSync(results, 'utf8');
    writeFileSync(results, text.slice(0, text.length - 40)); // a kill mid-write: the last task's line is cut
    const again = cli(['bench', '--candidates', DEMO, '--iters', '0', '--results', results, '--resume', '--json', join(dir, 'report.json')]);
    expect(again.code, again.stderr).toBe(0);
    const torn = Buffer.byteLength(text.split('\n').at(-2)!) + 1 - 40;
    expect(again.stderr).toContain(`bench: --resume: reused 2 of 3 tasks from ${results}; repaired a torn last line (${torn} bytes of a task cut short, which runs again)`);
    const report = BenchReportSchema.parse(JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')));
    expect(report.resumed).toEqual({ file: results, reusedTasks: 2, repairedBytes: torn });
    const whole = cli(['bench', '--candidates', DEMO, '--iters', '0', '--results', results, '--resume', '--json']);
    expect(whole.stderr).toContain(`bench: --resume: reused 3 of 3 tasks from ${results}\n`);
    expect(JSON.parse(whole.stdout).resumed).toEqual({ file: results, reusedTasks: 3, repairedBytes: 0 });
  });

  it('a worker that runs out of memory: one RUNTIME_ERROR line, no V8 frames', () => {
    const dir = tempSet({
      'L1/rms_norm.ts':
        "import { Module, type Tensor } from '@fastkernels/core';\n" +
        'export class RMSNorm extends Module {\n  constructor(readonly hiddenSize: number, readonly eps = 1e-6) { super(); }\n' +
        '  forward(x: Tensor): Tensor {\n    const hoard: number[][] = [];\n    for (;;) hoard.push(new Array(1e6).fill(Math.random()));\n    return x;\n  }\n}\n',
    });
    // a small heap, so the worker dies in a second (the variable reaches the worker: it forks with our environment)
    const r = cli(['bench', '--candidates', dir, '--iters', '0', '--json'], { env: { NODE_OPTIONS: '--max-old-space-size=96' } });
    expect(r.code, r.stderr).toBe(0);
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    const row = report.results[0]!;
    expect(row.status).toBe('RUNTIME_ERROR');
    expect(row.detail).toMatch(/^the bench worker died \(killed by SIGABRT\) during .*: out of memory \(the JavaScript heap; NODE_OPTIONS=--max-old-space-size=MB raises it\); its last words: FATAL ERROR: Reached heap limit/);
    expect(row.detail).not.toMatch(/0x[0-9a-f]{5,}|v8::|\n/);
  });
});
