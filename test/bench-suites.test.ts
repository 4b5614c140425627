// bench/run and what it shares (bench/lib/lib.sh, bench/lib/record.mjs, the decode-ab variants table): the parts that
// need no GPU. The suites themselves run on the GPU host (docs/gpu-host.md).
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseOverride } from '@fastkernels/backend-cuda';
import { afterAll, describe, expect, it } from 'vitest';
import { HEADLINES, measuredNothing, readResult, record } from '../bench/lib/record.mjs';
import { SettingError, VARIANTS, envFor, settingFor } from '../bench/suites/decode-ab/variants.mjs';

const BENCH = resolve(import.meta.dirname, '../bench');
const dir = mkdtempSync(join(tmpdir(), 'fk-bench-suites-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const lines = (f: string) => readFileSync(f, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);

describe('bench/lib/record.mjs', () => {
  it('replaces the current file and appends one headline line per run to history.jsonl', () => {
    const out = join(dir, 'rec');
    const file = join(dir, 'serve-work.json');
    const serve = (tokS: number) => ({ settings: { numRequests: 256 }, summary: { decodeBs1TokS: tokS, hostFractionBs64: 0.01, throughputOutputTokS: 10133.55, selfTestAgreement: 1 }, hf: { oursOverHf: 3.2 } });
    writeFileSync(file, JSON.stringify(serve(240.1)));
    record({ suite: 'serve', device: 'h200', file, name: 'serve.json', out, commit: 'c1', date: '2026-12-01T00:00:00Z' });
    writeFileSync(file, JSON.stringify(serve(242.5)));
    record({ suite: 'serve', device: 'h200', file, name: 'serve.json', out, commit: 'c2', date: '2026-12-02T00:00:00Z', args: '--quick' });
    const current = JSON.parse(readFileSync(join(out, 'h200', 'serve.json'), 'utf8'));
    expect(current.summary.decodeBs1TokS).toBe(242.5);
    expect(current.recorded).toMatchObject({ suite: 'serve', device: 'h200', commit: 'c2', args: '--quick', exit: 0 });
    const h = lines(join(out, 'h200', 'history.jsonl'));
    expect(h).toHaveLength(2);
    expect(h[0]).toMatchObject({ commit: 'c1', suite: 'serve', file: 'serve.json', decodeBs1TokS: 240.1, requests: 256, oursOverHf: 3.2 });
    expect(h[1]).toMatchObject({ commit: 'c2', date: '2026-12-02T00:00:00Z', args: '--quick', decodeBs1TokS: 242.5, throughputOutputTokS: 10130 });
  });

  it('a .jsonl phase log becomes { phases } in <name>.json; its history line names each phase verdict', () => {
    const file = join(dir, 'verify.jsonl');
    writeFileSync(file, '{"phase":"exploits","verdict":"PASS"}\n{"phase":"serve-full","verdict":"MISS"}\n');
    const line = record({ suite: 'verify', device: 'h100', file, name: 'verify.jsonl', out: join(dir, 'rec2') })!;
    expect(line.file).toBe('verify.json');
    expect(line.phases).toEqual({ exploits: 'PASS', 'serve-full': 'MISS' });
    expect(readResult(join(dir, 'rec2', 'h100', 'verify.json')).phases).toHaveLength(2);
    writeFileSync(file, '{"phase":"x"}\nnot json\n');
    expect(() => readResult(file)).toThrowError(`${file}: line 2 is not JSON`);
  });

  it('a run that measured nothing (every headline figure null, e.g. no GPU) leaves the current file and the history alone', () => {
    const out = join(dir, 'rec3');
    const file = join(dir, 'ab.json');
    writeFileSync(file, JSON.stringify({ settings: { plain: { stepMs: 4.7 } } }));
    expect(record({ suite: 'decode-ab', device: 'h200', file, name: 'decode-ab.json', out })).not.toBeNull();
    writeFileSync(file, JSON.stringify({ settings: { plain: { stepMs: null }, defaults: { stepMs: null } } }));
    expect(record({ suite: 'decode-ab', device: 'h200', file, name: 'decode-ab.json', out })).toBeNull();
    expect(JSON.parse(readFileSync(join(out, 'h200', 'decode-ab.json'), 'utf8')).settings.plain.stepMs).toBe(4.7);
    expect(lines(join(out, 'h200', 'history.jsonl'))).toHaveLength(1);
    expect(measuredNothing({ a: null, b: { c: null } })).toBe(true);
    expect(measuredNothing({ a: null, b: { c: 0 } })).toBe(false);
    expect(measuredNothing({})).toBe(false);
  });

  it('every headline takes an empty result without throwing (a suite cut short still records)', () => {
    for (const [suite, f] of Object.entries(HEADLINES)) expect(() => f({}), suite).not.toThrow();
  });
});

describe('bench/suites/decode-ab/variants.mjs: the one table of variants', () => {
  it('every variant is a valid tuning override file (the schema FASTKERNELS_TUNING is read with)', () => {
    for (const [name, v] of Object.entries(VARIANTS)) expect(() => parseOverride(v.tuning, `variant ${name}`), name).not.toThrow();
  });

  it('a variant is its base with its own settings on top', () => {
    expect(VARIANTS.gemv48!.tuning.linear).toMatchObject({ gemvUnroll: 4, gemvStreamWarpsPerSm: 48, gemvMaxRows: 1, gemvFuseGlu: false });
    expect(VARIANTS.rkv!.tuning.rotary).toEqual({ fuseKvStore: true });
    expect(VARIANTS.plain!.tuning).toMatchObject({ engine: { chainDecode: false }, launch: { pdl: false }, linear: { gemvMaxRows: 0 } });
    expect(VARIANTS.defaults!.tuning).toEqual({});
  });

  it('writes the override a process runs under and names it in FASTKERNELS_TUNING; defaults and ablations need no file', () => {
    const file = join(dir, 'v.tuning.json');
    expect(envFor('attention.decodeMmaMinSplitTokens=512,engine.chainDecode=false,BENCH_ABLATE=rmsNorm:fusedAddRmsNorm', file)).toEqual([
      `FASTKERNELS_TUNING=${file}`,
      'FASTKERNELS_BENCH_ABLATE=rmsNorm:fusedAddRmsNorm',
    ]);
    const written = JSON.parse(readFileSync(file, 'utf8'));
    expect(written).toMatchObject({ attention: { decodeMmaMinSplitTokens: 512 }, engine: { chainDecode: false } });
    expect(() => parseOverride(written, file)).not.toThrow();
    expect(envFor('defaults', join(dir, 'none.json'))).toEqual([]);
    expect(existsSync(join(dir, 'none.json'))).toBe(false);
    expect(envFor('BENCH_ABLATE=pagedDecodeAttention', join(dir, 'none.json'))).toEqual(['FASTKERNELS_BENCH_ABLATE=pagedDecodeAttention']);
  });

  it('refuses an unknown name with the choices, an old per-knob variable with the tuning-key form, and a bad assignment', () => {
    expect(() => settingFor('gemv64')).toThrowError(SettingError);
    expect(() => settingFor('gemv64')).toThrowError(Object.keys(VARIANTS).join(', '));
    expect(() => settingFor('DECODE_MIN_SPLIT_TOKENS=512')).toThrowError("'DECODE_MIN_SPLIT_TOKENS' is not a tuning key (section.key");
    expect(() => settingFor('attention.x.y=1')).toThrowError('is not a tuning key');
    expect(() => settingFor('launch.pdl=1;rm')).toThrowError("'launch.pdl=1;rm' is not NAME=VALUE");
  });
});

describe('bench/run and bench/lib/lib.sh', () => {
  const sh = (script: string, env: Record<string, string> = {}) =>
    spawnSync('bash', ['-c', script], { encoding: 'utf8', env: { ...process.env, ...env } });

  it('names the device from nvidia-smi: one card or, for a multi-GPU suite, the count', () => {
    const names = (n: string, c: number) => sh(`source "${BENCH}/lib/lib.sh"; fk_device_name "${n}" ${c}`).stdout.trim();
    expect(names('NVIDIA H200', 1)).toBe('h200');
    expect(names('NVIDIA H200', 2)).toBe('h200x2');
    expect(names('NVIDIA H100 80GB HBM3', 1)).toBe('h100');
    expect(names('NVIDIA L40S', 4)).toBe('l40sx4');
    const bin = join(dir, 'fake-smi');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'nvidia-smi'), '#!/bin/sh\nprintf "NVIDIA H200\\nNVIDIA H200\\n"\n');
    chmodSync(join(bin, 'nvidia-smi'), 0o755);
    const path = `${bin}:${process.env.PATH}`;
    expect(sh(`source "${BENCH}/lib/lib.sh"; fk_detect_device 1`, { PATH: path }).stdout.trim()).toBe('h200');
    expect(sh(`source "${BENCH}/lib/lib.sh"; fk_detect_device all`, { PATH: path }).stdout.trim()).toBe('h200x2');
    const none = sh(`source "${BENCH}/lib/lib.sh"; fk_detect_device 1`, { PATH: `${join(dir, 'empty')}:/usr/bin:/bin` });
    expect(none.status).toBe(2);
    expect(none.stderr).toContain('pass --device NAME');
  });

  it('session.sh: a step past its limit reads rc=124, and every step so far is in $OUT/call.tgz', () => {
    const out = join(dir, 'session-out');
    const work = join(dir, 'session-w');
    mkdirSync(out, { recursive: true });
    const r = sh(`source "${BENCH}/lib/session.sh"; step first 5 echo hello; step slow 1 sleep 5; tar tzf "$OUT/call.tgz"`, { OUT: out, W: work, PATH: `${join(dir, 'empty')}:/usr/bin:/bin` });
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(join(work, 'steps.txt'), 'utf8')).toMatch(/^first rc=0 \d+s\nslow rc=124 \d+s\n$/);
    expect(readFileSync(join(work, 'first.log'), 'utf8')).toBe('hello\n');
    expect(r.stdout).toContain('./first.log');
    expect(r.stdout).toContain('./slow.log');
  });

  it('refuses an unknown suite with the list, and a device that is not a folder name', () => {
    const r = spawnSync(join(BENCH, 'run'), ['no-such-suite', '--device', 'h200'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/unknown suite 'no-such-suite'.*kernels.*serve/);
    const d = spawnSync(join(BENCH, 'run'), ['kernels', '--device', '../h200'], { encoding: 'utf8' });
    expect(d.status).toBe(2);
    expect(d.stderr).toContain("--device '../h200' is not a folder name");
    expect(execFileSync(join(BENCH, 'run'), ['--list'], { encoding: 'utf8' })).toMatch(/^serve +1 +serve\.json$/m);
  });

  it('runs a suite in its work folder, records what it wrote under <out>/<device>, appends history, passes the exit status', () => {
    // a copy of bench/ with a stand-in suite, and a stand-in bundle whose `run --print-node` names this node
    const tree = join(dir, 'tree');
    cpSync(join(BENCH, 'run'), join(tree, 'bench', 'run'));
    cpSync(join(BENCH, 'lib'), join(tree, 'bench', 'lib'), { recursive: true });
    mkdirSync(join(tree, 'bench', 'suites', 'fake'), { recursive: true });
    writeFileSync(join(tree, 'bench', 'suites', 'fake', 'run.sh'), '#!/usr/bin/env bash\necho "args: $*"\necho \'{"commit":"x"}\' > "$OUT/fake.json"\nexit "${FAKE_RC:-0}"\n');
    chmodSync(join(tree, 'bench', 'suites', 'fake', 'run.sh'), 0o755);
    const bundle = join(dir, 'bundle');
    mkdirSync(bundle, { recursive: true });
    writeFileSync(join(bundle, 'run'), `#!/bin/sh\necho "${process.execPath}"\n`);
    writeFileSync(join(bundle, 'run-node'), '#!/bin/sh\n');
    chmodSync(join(bundle, 'run'), 0o755);
    writeFileSync(join(bundle, 'MANIFEST.json'), '{ "commit": "abc123" }');
    const out = join(dir, 'results');
    const go = (rc: string) => spawnSync(join(tree, 'bench', 'run'), ['fake', '--device', 'h100', '--out', out, '--quick'], { encoding: 'utf8', env: { ...process.env, FASTKERNELS_BUNDLE: bundle, FAKE_RC: rc } });
    const a = go('0');
    expect(a.stderr).toBe('');
    expect(a.status).toBe(0);
    expect(a.stdout).toContain('args: --quick');
    expect(existsSync(join(bundle, 'bench-work', 'h100', 'fake', 'fake.json'))).toBe(true);
    expect(JSON.parse(readFileSync(join(out, 'h100', 'fake.json'), 'utf8')).recorded).toMatchObject({ suite: 'fake', device: 'h100', commit: 'abc123', args: '--quick' });
    const b = go('3');
    expect(b.status).toBe(3);
    const h = lines(join(out, 'h100', 'history.jsonl'));
    expect(h.map((l) => l.exit)).toEqual([undefined, 3]);
    expect(h.every((l) => l.commit === 'abc123' && l.suite === 'fake')).toBe(true);
  });
});
