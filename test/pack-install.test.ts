/**
 * The packages publish independently: `npm pack` each one, install the tarballs into an empty folder (offline, from
 * the npm cache that `npm ci` filled; tools/pack-install.mjs) and run the installed CLI there: --help, list and the
 * CPU main job. Nothing of the checkout is reachable from that folder but the candidate files copied into it.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BenchReportSchema } from '@fastkernels/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { packInstall, type PackedPackage } from '../tools/pack-install.mjs';
import { DEMO, ROOT, STACK } from './helpers.js';

const app = mkdtempSync(join(tmpdir(), 'fk-pack-'));
let packed: PackedPackage[] = [];

/** The installed bin, as a user of the published packages runs it. */
function fastkernels(args: readonly string[]) {
  const r = spawnSync(join(app, 'node_modules/.bin/fastkernels'), [...args], {
    cwd: app, encoding: 'utf8', timeout: 120_000,
    env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1', NODE_PATH: '' },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  packed = packInstall(app);
  // A tarball holds the native addons when they were built here (backend-cuda/nccl `files`); CI builds none, and a
  // machine without CUDA must not need them: take them out, so the CPU job below proves they load lazily.
  for (const pkg of ['backend-cuda', 'backend-nccl']) rmSync(join(app, 'node_modules/@fastkernels', pkg, 'build'), { recursive: true, force: true });
  cpSync(join(ROOT, DEMO), join(app, 'cpu-demo'), { recursive: true });
}, 150_000);

describe('the packed packages, installed into an empty folder', () => {
  it('every package under packages/ is packed, with its build and without sources or tests', () => {
    expect(packed.map((p) => p.name).sort()).toEqual([
      '@fastkernels/backend-cpu', '@fastkernels/backend-cuda', '@fastkernels/backend-nccl', '@fastkernels/backend-triton',
      '@fastkernels/cli', '@fastkernels/core', '@fastkernels/macroeval', '@fastkernels/model-zoo',
    ]);
    for (const p of packed) {
      expect(p.files, p.name).toContain('package.json');
      expect(p.files, p.name).toContain('dist/index.js');
      expect(p.files, p.name).toContain('dist/index.d.ts');
      expect(p.files.filter((f) => /\.test\.|^src\/|tsbuildinfo/.test(f)), p.name).toEqual([]); // tsc's build state stays home
    }
    expect(packed.find((p) => p.name === '@fastkernels/cli')!.files).toContain('bin/fastkernels.js');
  });

  it('the install holds copies, not links into the checkout', () => {
    for (const p of packed) {
      const dir = join(app, 'node_modules', p.name);
      expect(lstatSync(dir).isSymbolicLink(), p.name).toBe(false);
      expect(realpathSync(dir).startsWith(realpathSync(app)), p.name).toBe(true);
    }
  });

  it('fastkernels --help and --version', () => {
    const r = fastkernels(['--help']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/<command> \[options\]/);
    expect(r.stdout).toContain('bench');
    const cliVersion = packed.find((p) => p.name === '@fastkernels/cli')!.version;
    expect(fastkernels(['--version']).stdout.trim()).toBe(cliVersion);
  });

  it('fastkernels list', () => {
    const r = fastkernels(['list']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/L1\/rms_norm\s+1\s+.*RMSNorm/);
  });

  it('the CPU main job: bench --candidates cpu-demo (the native CUDA/NCCL addons are not needed to load)', () => {
    const r = fastkernels(['bench', '--candidates', 'cpu-demo', '--iters', '3', '--json', 'report.json']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(STACK);
    expect(r.stdout).toMatch(/L1\/rms_norm\s+small\s+f32\s+PASSED/);
    const report = BenchReportSchema.parse(JSON.parse(readFileSync(join(app, 'report.json'), 'utf8')));
    const status = (task: string) => [...new Set(report.results.filter((x) => x.task === task).map((x) => x.status))];
    expect([status('L1/rms_norm'), status('L1/silu_and_mul'), status('L1/embedding')]).toEqual([['PASSED'], ['INCORRECT_NUMERICAL'], ['RUNTIME_ERROR']]);
    expect(report.backend).toBe('cpu');
    expect(existsSync(join(app, 'node_modules/@fastkernels/cli/src'))).toBe(false);
  });
});
