import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UserError } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { LaunchExitError } from './commands/launch.js';
import type { Io } from './io.js';
import { relaunchAsRanks, runWithTensorParallel, tensorParallelRole, tpFlag, type RankRun } from './tensor-parallel.js';

const launched = (rank: number, world: number) => ({ RANK: String(rank), WORLD_SIZE: String(world), MASTER_PORT: '29500', FASTKERNELS_RDZV_TOKEN: 't' });

describe('--tp: which part this process plays', () => {
  it('--tp 1 runs as always; --tp N outside a launch relaunches itself; inside, it is a rank', () => {
    expect(tensorParallelRole(1, launched(0, 2))).toEqual({ kind: 'single' });
    expect(tensorParallelRole(2, {})).toEqual({ kind: 'parent' });
    expect(tensorParallelRole(2, launched(1, 2))).toEqual({ kind: 'rank', rank: 1, world: 2 });
  });

  it('a launch of another size, or a bad --tp, is bad input', () => {
    expect(() => tensorParallelRole(2, launched(0, 4))).toThrow(UserError);
    expect(() => tensorParallelRole(2, launched(0, 4))).toThrow(/--tp 2 inside a launch of 4 ranks/);
    expect(() => tpFlag(0)).toThrow(/--tp|from 1 to 64/);
    expect(tpFlag(undefined)).toBe(1);
  });
});

// A stand-in for the CLI's entry: each rank writes what it was started with, and one rank may fail.
const work = mkdtempSync(join(tmpdir(), 'fk-tp-relaunch-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const ENTRY = join(work, 'entry.mjs');
writeFileSync(ENTRY, `
import { writeFileSync } from 'node:fs';
const args = process.argv.slice(2);
const flag = (f) => { const i = args.indexOf(f); return i >= 0 ? args[i + 1] : undefined; };
const e = process.env;
writeFileSync(flag('--out') + '/rank-' + e.RANK + '.json', JSON.stringify({ rank: e.RANK, world: e.WORLD_SIZE, device: e.FASTKERNELS_DEVICE, args }));
if (flag('--fail-rank') === e.RANK) process.exit(3);
`);

const capture = (): Io & { text: string } => {
  const o = { text: '', out: (t: string) => void (o.text += t), err: (t: string) => void (o.text += t) };
  return o;
};

describe('runWithTensorParallel: the re-exec under the launcher that generate, e2e and bench share', () => {
  it('--tp 1: the body runs here as rank 0 of 1, with the command\'s io', async () => {
    const io = capture();
    const runs: RankRun[] = [];
    await runWithTensorParallel({ tp: 1, io, rawArgs: [], preflight: () => { throw new Error('no preflight at --tp 1'); } }, async (r) => void runs.push(r));
    expect(runs).toEqual([{ rank: 0, world: 1, io, primary: true }]);
  });

  it('--tp N: the preflight refuses bad input before any rank starts (its UserError, exit 2)', async () => {
    const body = async () => { throw new Error('no body in the parent'); };
    const refused = runWithTensorParallel({ tp: 2, io: capture(), rawArgs: [], env: {}, preflight: () => { throw new UserError('bad model', { field: '--model' }); } }, body);
    await expect(refused).rejects.toThrow(UserError);
  });

  it('--tp N: the same command line again as N ranks (RANK, WORLD_SIZE, one device each); resolves when all succeed', async () => {
    const out = mkdtempSync(join(work, 'ok-'));
    const rawArgs = ['e2e', '--out', out, '--tp', '2'];
    let preflights = 0;
    await runWithTensorParallel(
      { tp: 2, io: capture(), rawArgs, env: {}, preflight: () => void preflights++, relaunch: { entry: ENTRY, execArgv: [], output: () => {} } },
      async () => { throw new Error('no body in the parent'); },
    );
    expect(preflights).toBe(1);
    for (const r of [0, 1]) {
      expect(JSON.parse(readFileSync(join(out, `rank-${r}.json`), 'utf8'))).toEqual({ rank: String(r), world: '2', device: String(r), args: rawArgs });
    }
  });

  it('a rank that fails stops the run: LaunchExitError with its exit code and the launcher\'s reason', async () => {
    const out = mkdtempSync(join(work, 'fail-'));
    const io = capture();
    const e = await relaunchAsRanks(2, ['bench', '--out', out, '--fail-rank', '1', '--tp', '2'], io, { entry: ENTRY, execArgv: [], output: () => {} }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(LaunchExitError);
    expect((e as LaunchExitError).exitCode).toBe(3);
    expect((e as LaunchExitError).message).toMatch(/^--tp 2: rank 1 \(pid \d+\) exited with code 3/);
  });
});
