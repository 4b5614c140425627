import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launch, rankEnv, type LaunchResult } from './launcher.js';
import { RendezvousServer, rendezvous } from './rendezvous.js';

const here = dirname(fileURLToPath(import.meta.url));
let work: string;
let rankScript: string;
let launcherScript: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'fk-launch-'));
  rankScript = join(work, 'rank.mjs');
  launcherScript = join(work, 'launcher.mjs');
  const common = { bundle: true, platform: 'node' as const, format: 'esm' as const, target: 'node20', logLevel: 'warning' as const, external: ['@fastkernels/*'] };
  await build({ ...common, entryPoints: [join(here, 'fixtures', 'rank-script.ts')], outfile: rankScript });
  await build({ ...common, entryPoints: [join(here, 'fixtures', 'launcher-script.ts')], outfile: launcherScript });
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

function outDir(name: string): string {
  return mkdtempSync(join(work, `${name}-`));
}
const readJson = (dir: string, f: string) => JSON.parse(readFileSync(join(dir, f), 'utf8'));
const files = (dir: string) => readdirSync(dir).sort();

async function run(nproc: number, env: Record<string, string>, extra: Partial<Parameters<typeof launch>[0]> = {}): Promise<{ r: LaunchResult; logs: string[]; lines: string[]; ms: number }> {
  const logs: string[] = [];
  const lines: string[] = [];
  const t0 = Date.now();
  const h = await launch({
    nproc,
    command: process.execPath,
    args: [rankScript],
    env: { ...process.env, ...env },
    killGraceMs: 2000,
    forwardSignals: false,
    log: (l) => logs.push(l),
    output: (rank, stream, line) => lines.push(`${rank}/${stream}: ${line}`),
    ...extra,
  });
  const r = await h.result;
  return { r, logs, lines, ms: Date.now() - t0 };
}

describe('rendezvous', () => {
  it('hands every rank the same 128-byte id and its rank; refuses bad tokens and duplicate ranks', async () => {
    const rejects: string[] = [];
    const s = new RendezvousServer({ world: 2, token: 't', onReject: (w) => rejects.push(w) });
    const port = await s.start();
    try {
      const id = new Uint8Array(128).map((_, i) => i);
      await expect(rendezvous({ port, rank: 1, token: 'wrong', timeoutMs: 2000 })).rejects.toThrow(/bad rendezvous token/);
      const p1 = rendezvous({ port, rank: 1, token: 't', timeoutMs: 5000 });
      await new Promise((r) => setTimeout(r, 50));
      await expect(rendezvous({ port, rank: 1, token: 't', timeoutMs: 2000 })).rejects.toThrow(/rank 1 joined twice/);
      const p0 = rendezvous({ port, rank: 0, token: 't', makeId: () => id, timeoutMs: 5000 });
      const [a, b] = await Promise.all([p0, p1]);
      expect([a.rank, a.world, b.rank, b.world]).toEqual([0, 2, 1, 2]);
      expect([...a.id]).toEqual([...id]);
      expect([...b.id]).toEqual([...id]);
      expect(rejects).toEqual(['bad rendezvous token', 'rank 1 joined twice']);
      await expect(rendezvous({ port, rank: 0, token: 't', makeId: () => new Uint8Array(5), timeoutMs: 1000 })).rejects.toThrow(/128 bytes/);
    } finally {
      s.close();
    }
  });

  it('rank 0 must bring the id; a client retries until the server listens, then times out clearly', async () => {
    await expect(rendezvous({ port: 1, rank: 0, token: 't', timeoutMs: 100 })).rejects.toThrow(/rank 0 must make the shared id/);
    await expect(rendezvous({ port: 1, rank: 1, token: 't', timeoutMs: 300 })).rejects.toThrow(/got no answer from 127\.0\.0\.1:1/);
  });
});

describe('rankEnv', () => {
  it('sets the torchrun variables, NCCL_NVLS_ENABLE=0 unless set, and the device per mode', () => {
    const e = rankEnv({ PATH: '/usr/bin' }, 1, 2, 4242, 'tok', 'all');
    expect(e).toMatchObject({ RANK: '1', WORLD_SIZE: '2', LOCAL_RANK: '1', MASTER_ADDR: '127.0.0.1', MASTER_PORT: '4242', FASTKERNELS_LOCAL_RANK: '1', FASTKERNELS_DEVICE: '1', FASTKERNELS_RDZV_TOKEN: 'tok', NCCL_NVLS_ENABLE: '0' });
    expect(e.CUDA_VISIBLE_DEVICES).toBeUndefined();
    expect(e.PATH.split(':')[0]).toBe(dirname(process.execPath));
    expect(rankEnv({ NCCL_NVLS_ENABLE: '1' }, 0, 1, 1, 't', 'all').NCCL_NVLS_ENABLE).toBe('1');
    expect(rankEnv({ CUDA_VISIBLE_DEVICES: '4,6' }, 1, 2, 1, 't', 'split')).toMatchObject({ CUDA_VISIBLE_DEVICES: '6', FASTKERNELS_DEVICE: '0' });
    expect(rankEnv({}, 1, 2, 1, 't', 'split').CUDA_VISIBLE_DEVICES).toBe('1');
    expect(() => rankEnv({ CUDA_VISIBLE_DEVICES: '0' }, 1, 2, 1, 't', 'split')).toThrow(/lists 1 device/);
  });
});

describe('launch (3 node ranks, no GPU)', () => {
  it('rendezvous: every rank gets the same 128-byte id, distinct ranks and the environment', { timeout: 30_000 }, async () => {
    const dir = outDir('ok');
    const { r, lines } = await run(3, { FK_TEST_OUT: dir, FK_TEST_MODE: 'ok' });
    expect(r.exitCode).toBe(0);
    expect(r.failed).toBeUndefined();
    expect(r.ranks.map((x) => [x.rank, x.code])).toEqual([[0, 0], [1, 0], [2, 0]]);
    const reps = [0, 1, 2].map((i) => readJson(dir, `rank-${i}.json`));
    expect(reps.map((x) => x.rank)).toEqual([0, 1, 2]);
    expect(new Set(reps.map((x) => x.id)).size).toBe(1);
    expect(reps[0].id).toHaveLength(256);
    for (const [i, x] of reps.entries()) {
      expect(x.world).toBe(3);
      expect(x.env).toMatchObject({ RANK: String(i), WORLD_SIZE: '3', LOCAL_RANK: String(i), MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(r.port), NCCL_NVLS_ENABLE: '0', FASTKERNELS_LOCAL_RANK: String(i) });
    }
    expect(lines.filter((l) => /stdout: rank \d of 3 ready/.test(l))).toHaveLength(3);
  });

  it('a failing rank (exit 3) stops the others within the grace period and is named', { timeout: 30_000 }, async () => {
    const dir = outDir('fail');
    const { r, logs, ms } = await run(3, { FK_TEST_OUT: dir, FK_TEST_MODE: 'fail', FK_FAIL_RANK: '1' });
    expect(r.exitCode).toBe(3);
    expect(r.failed).toMatchObject({ rank: 1, code: 3, signal: null });
    expect(logs.join('\n')).toMatch(/rank 1 \(pid \d+\) exited with code 3; stopping the other 2 rank\(s\)/);
    // the others got SIGTERM (their handler exits 143) well before any SIGKILL
    expect(files(dir)).toEqual(expect.arrayContaining(['sigterm-0.json', 'sigterm-2.json']));
    expect(r.ranks.filter((x) => x.rank !== 1).map((x) => x.code)).toEqual([143, 143]);
    expect(ms).toBeLessThan(15_000);
  });

  it('ranks that ignore SIGTERM are killed with SIGKILL after the grace period', { timeout: 30_000 }, async () => {
    const dir = outDir('ignore');
    const { r, logs } = await run(2, { FK_TEST_OUT: dir, FK_TEST_MODE: 'fail', FK_FAIL_RANK: '0' }, { killGraceMs: 500 });
    expect(r.exitCode).toBe(3);
    expect(r.ranks[1]).toMatchObject({ rank: 1 });
    // rank 1 handled SIGTERM by exiting 143 (mode 'fail' does not ignore it); now one that ignores it:
    const dir2 = outDir('ignore2');
    const h = await launch({ nproc: 2, command: process.execPath, args: [rankScript], env: { ...process.env, FK_TEST_OUT: dir2, FK_TEST_MODE: 'ignore-term' }, killGraceMs: 500, forwardSignals: false, log: (l) => logs.push(l), output: () => {} });
    await waitFor(() => existsSync(join(dir2, 'rank-0.json')) && existsSync(join(dir2, 'rank-1.json')));
    h.signal('SIGTERM');
    const r2 = await h.result;
    expect(r2.interrupted).toBe('SIGTERM');
    expect(r2.ranks.map((x) => x.signal)).toEqual(['SIGKILL', 'SIGKILL']);
    expect(logs.join('\n')).toMatch(/still running after 500 ms; sending SIGKILL/);
  });

  it('forwards SIGINT to every rank; the result says so (130)', { timeout: 30_000 }, async () => {
    const dir = outDir('int');
    const h = await launch({ nproc: 3, command: process.execPath, args: [rankScript], env: { ...process.env, FK_TEST_OUT: dir, FK_TEST_MODE: 'wait' }, killGraceMs: 2000, forwardSignals: false, log: () => {}, output: () => {} });
    await waitFor(() => [0, 1, 2].every((i) => existsSync(join(dir, `rank-${i}.json`))));
    h.signal('SIGINT');
    const r = await h.result;
    expect(r.interrupted).toBe('SIGINT');
    expect(r.exitCode).toBe(130);
    expect(r.failed).toBeUndefined();
    expect(files(dir).filter((f) => f.startsWith('sigint'))).toEqual(['sigint-0.json', 'sigint-1.json', 'sigint-2.json']);
  });

  it('a real SIGTERM to the launcher process reaches every rank and the launcher exits 143', { timeout: 30_000 }, async () => {
    const dir = outDir('term');
    const p = spawn(process.execPath, [launcherScript], { env: { ...process.env, FK_TEST_OUT: dir, FK_TEST_MODE: 'wait', FK_NPROC: '2', FK_RANK_SCRIPT: rankScript }, stdio: 'ignore' });
    await waitFor(() => existsSync(join(dir, 'rank-0.json')) && existsSync(join(dir, 'rank-1.json')));
    p.kill('SIGTERM');
    const code = await new Promise<number | null>((res) => p.on('exit', (c) => res(c)));
    expect(code).toBe(143);
    expect(files(dir)).toEqual(expect.arrayContaining(['sigterm-0.json', 'sigterm-1.json']));
    expect(readJson(dir, 'launcher-result.json').interrupted).toBe('SIGTERM');
  });

  it('a command that cannot start is a failure of rank 0 with a clear reason', { timeout: 15_000 }, async () => {
    const logs: string[] = [];
    const h = await launch({ nproc: 2, command: '/nonexistent/fk-cmd', killGraceMs: 500, forwardSignals: false, log: (l) => logs.push(l) });
    const r = await h.result;
    expect(r.exitCode).toBe(127);
    expect(r.failed?.reason).toMatch(/could not start \/nonexistent\/fk-cmd/);
  });

  it('refuses a bad --nproc and an empty command', async () => {
    await expect(launch({ nproc: 0, command: 'x' })).rejects.toThrow(/positive integer/);
    await expect(launch({ nproc: 1, command: '' })).rejects.toThrow(/no command/);
  });
});

async function waitFor(cond: () => boolean, ms = 15_000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 25));
  }
}
