import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BenchReportSchema, RESULTS_VERSION, type BenchReport } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { BIN, ROOT, STACK, cli, tempSet } from './helpers.js';

const GOOD_RMS = readFileSync(join(ROOT, 'examples/candidates/cpu-demo/L1/rms_norm.ts'), 'utf8');
const SILU = `import { Module, type Tensor } from '@fastkernels/core';
export class SiluAndMul extends Module { forward(x: Tensor): Tensor { return this.ctx.backend.ops.siluAndMul(x); } }
`;
const SOFTMAX = readFileSync(join(ROOT, 'test/exploits/tiny-output/L1/softmax.ts'), 'utf8');
const EMBEDDING = `import { Module, type Tensor } from '@fastkernels/core';
export class VocabParallelEmbedding extends Module {
  readonly weight: Tensor;
  constructor(readonly numEmbeddings: number, readonly embeddingDim: number) {
    super();
    this.weight = this.parameter('weight', [numEmbeddings, embeddingDim]);
  }
  forward(ids: Tensor): Tensor {
    return this.ctx.backend.ops.embedding(ids, this.weight);
  }
}
`;

/** A one-tensor safetensors file of int64 values. */
function safetensorsI64(name: string, values: number[]): Buffer {
  let head = JSON.stringify({ [name]: { dtype: 'I64', shape: [values.length], data_offsets: [0, values.length * 8] } });
  while ((head.length + 8) % 8) head += ' ';
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(head.length));
  const data = Buffer.alloc(values.length * 8);
  values.forEach((v, i) => data.writeBigInt64LE(BigInt(v), i * 8));
  return Buffer.concat([len, Buffer.from(head), data]);
}
const FAST = ['--iters', '8', '--warmup', '2', '--warmup-ms', '0'];

function set3(): string {
  return tempSet({ 'L1/rms_norm.ts': GOOD_RMS, 'L1/silu_and_mul.ts': SILU, 'L1/softmax.ts': SOFTMAX });
}

function expectBadInput(args: string[], ...mentions: RegExp[]) {
  const r = cli(args);
  expect(r.code, r.stderr + r.stdout).toBe(2);
  expect(r.stderr).toMatch(/^fastkernels: error: /);
  expect(r.stderr).toMatch(/fix: /);
  for (const m of mentions) expect(r.stderr).toMatch(m);
  expect(r.stderr).not.toMatch(STACK);
  return r;
}

/** What must not depend on timing: per case, its task, name and status. */
const outcome = (r: BenchReport) => r.results.map((x) => `${x.task}/${x.case}:${x.status}`).sort();
const lines = (file: string) => readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { kind: string; task?: string });

describe('results file, SIGKILL and --resume', () => {
  it('a run killed with SIGKILL mid-way resumes to the same report as an uninterrupted run, nothing lost or duplicated', async () => {
    const dir = set3();
    const full = cli(['bench', '--candidates', dir, ...FAST, '--results', join(dir, 'full.jsonl'), '--json', join(dir, 'full.json')]);
    expect(full.code, full.stderr).toBe(0);
    const ref = BenchReportSchema.parse(JSON.parse(readFileSync(join(dir, 'full.json'), 'utf8')));

    const file = join(dir, 'run.jsonl');
    const child = spawn(process.execPath, [BIN, 'bench', '--candidates', dir, '--iters', '200', '--warmup', '2', '--warmup-ms', '0', '--results', file], { cwd: ROOT, stdio: 'ignore' });
    // kill the CLI as soon as the first task is on disk (the second is then running in the worker)
    await new Promise<void>((resolve, reject) => {
      const t0 = Date.now();
      const poll = setInterval(() => {
        if (existsSync(file) && lines(file).length >= 2) {
          clearInterval(poll);
          child.kill('SIGKILL');
          resolve();
        } else if (Date.now() - t0 > 60_000) {
          clearInterval(poll);
          child.kill('SIGKILL');
          reject(new Error('no task finished within 60 s'));
        }
      }, 10);
    });
    await new Promise((r) => child.once('exit', r));
    const partial = lines(file);
    expect(partial[0]!.kind).toBe('header');
    expect(partial.length).toBeLessThan(4);
    // resume with the flags that started it: only the missing tasks run
    const resumed = cli(['bench', '--candidates', dir, '--iters', '200', '--warmup', '2', '--warmup-ms', '0', '--results', file, '--resume', '--json', join(dir, 'resumed.json')]);
    expect(resumed.code, resumed.stderr).toBe(0);
    const after = lines(file);
    const tasks = after.filter((l) => l.kind === 'task').map((l) => l.task);
    expect(new Set(tasks).size).toBe(tasks.length);
    expect(tasks.sort()).toEqual(['L1/rms_norm', 'L1/silu_and_mul', 'L1/softmax']);
    const report = BenchReportSchema.parse(JSON.parse(readFileSync(join(dir, 'resumed.json'), 'utf8')));
    expect(report.complete).toBe(true);
    const details = (r: BenchReport) => r.results.filter((x) => x.status !== 'PASSED').map((x) => `${x.task}/${x.case}: ${x.status}: ${x.detail ?? ''}`).join('\n');
    expect(outcome(report), `resumed:\n${details(report)}\nuninterrupted:\n${details(ref)}`).toEqual(outcome(ref));
    expect(report.machine?.[0]?.profile?.copyBytesPerSec).toBeGreaterThan(0);
  }, 150_000);

  it('an existing results file needs --resume; another configuration or format version is a clear error', () => {
    const dir = tempSet({ 'L1/rms_norm.ts': GOOD_RMS });
    const file = join(dir, 'r.jsonl');
    expect(cli(['bench', '--candidates', dir, ...FAST, '--results', file]).code).toBe(0);
    const size = readFileSync(file).byteLength;
    expectBadInput(['bench', '--candidates', dir, ...FAST, '--results', file], /r\.jsonl: --results: already exists/, /--resume/);
    expectBadInput(['bench', '--candidates', dir, '--iters', '9', '--warmup', '2', '--warmup-ms', '0', '--results', file, '--resume'], /r\.jsonl: --resume: was written with another configuration: iters: 8 vs 9/);
    expect(readFileSync(file).byteLength).toBe(size); // nothing written by the refused runs
    const old = join(dir, 'old.jsonl');
    const text = readFileSync(file, 'utf8').replace(`"version":${RESULTS_VERSION}`, '"version":0');
    writeFileSync(old, text);
    expectBadInput(['bench', '--candidates', dir, ...FAST, '--results', old, '--resume'], /old\.jsonl: --resume: was written in results format version 0; this CLI reads and writes version 1/);
    writeFileSync(join(dir, 'junk.jsonl'), 'hello\n');
    expectBadInput(['merge', join(dir, 'junk.jsonl')], /junk\.jsonl: files: is not a fastkernels results file/);
    // resuming a complete file runs nothing and reports the same
    const again = cli(['bench', '--candidates', dir, ...FAST, '--results', file, '--resume', '--json']);
    expect(again.code).toBe(0);
    expect(BenchReportSchema.parse(JSON.parse(again.stdout)).results.every((r) => r.status === 'PASSED')).toBe(true);
  });
});

describe('shards and merge', () => {
  it('--shard splits the tasks deterministically; merge combines the shards, drops duplicates and reports conflicts', () => {
    const dir = set3();
    const s0 = cli(['bench', '--candidates', dir, '--iters', '0', '--warmup-ms', '0', '--shard', '0/2', '--results', join(dir, 's0.jsonl')]);
    const s1 = cli(['bench', '--candidates', dir, '--iters', '0', '--warmup-ms', '0', '--shard', '1/2', '--results', join(dir, 's1.jsonl')]);
    expect(s0.code, s0.stderr).toBe(0);
    expect(s1.code, s1.stderr).toBe(0);
    const t0 = lines(join(dir, 's0.jsonl')).filter((l) => l.kind === 'task').map((l) => l.task);
    const t1 = lines(join(dir, 's1.jsonl')).filter((l) => l.kind === 'task').map((l) => l.task);
    expect(t0).toEqual(['L1/rms_norm', 'L1/softmax']);
    expect(t1).toEqual(['L1/silu_and_mul']);
    const m = cli(['merge', join(dir, 's0.jsonl'), join(dir, 's1.jsonl'), join(dir, 's1.jsonl'), '--out', join(dir, 'all.jsonl'), '--json', join(dir, 'all.json')]);
    expect(m.code, m.stderr).toBe(0);
    expect(m.stdout).toMatch(/3 tasks, 8 cases, 1 duplicate\(s\) dropped, 0 conflict\(s\)/);
    const report = BenchReportSchema.parse(JSON.parse(readFileSync(join(dir, 'all.json'), 'utf8')));
    expect(report.complete).toBe(true);
    expect(report.summary.total.benched).toBe(3);
    // a rerun that disagrees: a conflict, reported, the first kept
    const conflicting = readFileSync(join(dir, 's1.jsonl'), 'utf8').replace(/"status":"PASSED"/, '"status":"INCORRECT_NUMERICAL"');
    writeFileSync(join(dir, 's1b.jsonl'), conflicting);
    const c = cli(['merge', join(dir, 's0.jsonl'), join(dir, 's1.jsonl'), join(dir, 's1b.jsonl'), '--json', join(dir, 'c.json')]);
    expect(c.code).toBe(0);
    expect(c.stderr).toMatch(/conflict: L1\/silu_and_mul differs between .*s1\.jsonl and .*s1b\.jsonl/);
    expect(BenchReportSchema.parse(JSON.parse(readFileSync(join(dir, 'c.json'), 'utf8'))).conflicts).toHaveLength(1);
    // shards of another configuration do not merge
    cli(['bench', '--candidates', dir, '--iters', '0', '--warmup-ms', '0', '--seed', '7', '--shard', '1/2', '--results', join(dir, 'other.jsonl')]);
    expectBadInput(['merge', join(dir, 's0.jsonl'), join(dir, 'other.jsonl')], /another configuration .*seed: 200 vs 7/);
  });
});

describe('bad input: shards, GPUs, captures', () => {
  it('--shard out of range, a GPU index that does not exist, timeouts that are not durations', () => {
    expectBadInput(['bench', '--self-test', '--task', 'rms_norm', '--shard', '2/2'], /--shard: 2\/2 is out of range: the index runs from 0 to 1/);
    expectBadInput(['bench', '--self-test', '--task', 'rms_norm', '--shard', 'x'], /--shard: must look like i\/n/);
    expectBadInput(['bench', '--self-test', '--task', 'rms_norm', '--backend', 'cpu', '--gpus', '0,1'], /--gpus: device 1 does not exist: the cpu backend has device 0/);
    expectBadInput(['bench', '--self-test', '--task', 'rms_norm', '--task-timeout', 'soon'], /--task-timeout: must be a positive duration/);
  });

  it('missing or corrupt capture files name the file', () => {
    const dir = tempSet({ 'caps/a.json': '{"version": 1, "model": "m", "workload": "w", "tasks": {', 'L1/rms_norm.ts': GOOD_RMS });
    expectBadInput(['bench', '--candidates', dir, '--captures', join(dir, 'nope')], /nope: --captures: no such folder/);
    expectBadInput(['bench', '--candidates', dir, '--captures', join(dir, 'caps')], /caps\/a\.json: --captures: is not valid JSON/);
    writeFileSync(join(dir, 'caps/a.json'), JSON.stringify({ version: 1, model: 'm', workload: 'w', tasks: { 'L1/rms_norm': { init: [[64]], forward: [{ dims: { T: 3 }, dtype: 'f32' }] } } }));
    expectBadInput(['bench', '--candidates', dir, '--captures', join(dir, 'caps')], /caps\/a\.json: --captures: is not a capture index: tasks\.L1\/rms_norm\.forward\.0\.count/);
    writeFileSync(join(dir, 'caps/a.json'), JSON.stringify({ version: 1, model: 'm', workload: 'w', tasks: { 'L1/embedding': { init: [[100, 64]], forward: [{ dims: { T: 4, V: 100, H: 64 }, dtype: 'f32', count: 3, values: { inputIds: { file: 'ids.safetensors', tensor: 'ids' } } }] } } }));
    writeFileSync(join(dir, 'L1/embedding.ts'), EMBEDDING);
    expectBadInput(['bench', '--candidates', dir, '--captures', join(dir, 'caps')], /ids\.safetensors: --captures: missing or unreadable \(ENOENT\)/);
    writeFileSync(join(dir, 'caps/ids.safetensors'), Buffer.from([200, 0, 0, 0, 0, 0, 0, 0, 123]));
    expectBadInput(['bench', '--candidates', dir, '--captures', join(dir, 'caps')], /ids\.safetensors: --captures: not a safetensors file/);
    writeFileSync(join(dir, 'caps/ids.safetensors'), safetensorsI64('ids', [7, 0, 99, 7]));
    const ok = cli(['bench', '--candidates', dir, '--captures', join(dir, 'caps'), '--task', 'embedding', '--iters', '0', '--json']);
    expect(ok.code, ok.stderr).toBe(0);
    const rows = BenchReportSchema.parse(JSON.parse(ok.stdout)).results;
    expect(rows.find((x) => x.case === 'cap-m-w-T4-V100-H64-f32')?.status).toBe('PASSED');
  });
});

describe('captures', () => {
  it('captured shapes are added as cases (smallest, largest, median, most frequent), captured values are replayed, and a tiny-output exploit at a captured shape is caught', () => {
    const dir = tempSet({ 'L1/softmax.ts': SOFTMAX });
    mkdirSync(join(dir, 'caps'));
    // a huge vocabulary: probabilities far below f32 atol, where a uniform output passes a plain atol check
    const fwd = [
      { dims: { B: 2, V: 64 }, dtype: 'f32', count: 1 },
      { dims: { B: 1, V: 1_200_000 }, dtype: 'f32', count: 2 },
      { dims: { B: 3, V: 32 }, dtype: 'f32', count: 9 },
    ];
    writeFileSync(join(dir, 'caps/index.json'), JSON.stringify({ version: 1, model: 'tiny', workload: 'chat', tasks: { 'L1/softmax': { init: [[-1]], forward: fwd } } }));
    const r = cli(['bench', '--candidates', dir, '--captures', join(dir, 'caps'), '--max-shapes', '2', '--iters', '0', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    const caps = report.results.filter((x) => x.case.startsWith('cap-'));
    expect(caps.map((x) => x.case)).toEqual(['cap-tiny-chat-B3-V32-f32', 'cap-tiny-chat-B1-V1200000-f32']);
    expect(caps[0]!.status).toBe('PASSED');
    expect(caps[1]!.status).toBe('INCORRECT_NUMERICAL');
    expect(caps[1]!.detail).toMatch(/relative L2 error/);
  }, 120_000);
});

describe('self-test', () => {
  // A statistical test on a shared CPU: a load burst can move one run's estimate past the bounds below, and noise does
  // not repeat, so a miss is tried again. Its misses had two causes: a harness that timed the sides differently (every
  // progress report came right before a candidate call: the baselines read 2-8% slower as candidates, fixed in
  // bench.ts's pairOrder) and 60 timed pairs of 15-70 us calls, whose medians moved by up to 24% on an idle machine;
  // 300 pairs held every task within 1.6% of 1 in five runs (about 4 s in all).
  it('the baselines against themselves: every check passes, the speedup CI contains 1', { retry: 2 }, () => {
    const r = cli(['bench', '--self-test', '--task', 'rms_norm,silu_and_mul,linear,embedding', '--iters', '300', '--warmup-ms', '50', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    expect(report.options.selfTest).toBe(true);
    for (const x of report.results) {
      expect(x.status, `${x.task} ${x.case}: ${x.detail}`).toBe('PASSED');
      expect(x.checks).toEqual(expect.arrayContaining(['integrity', 'poison', 'outputs-owned-fresh', 'reverify-timed-calls', 'recheck', 'physical-floor', 'hidden-shape']));
      expect(x.checks).not.toContain('escape'); // device timer vs host clock: a GPU check (on the CPU both are the host's clock)
    }
    // The CI must reach 1 within 2%, and the point estimate lie within 5% of it: this runs on a CPU shared with the
    // other test files, whose load drifts between the interleaved calls, and a 95% interval misses the truth one
    // time in twenty by design, per task (CIs of [0.97, 0.9996] and ending at 0.98998 were seen in CI runs, and an
    // estimate 3.5% off for the tiny embedding case with its CI reaching 1). A harness that timed the two sides
    // differently would be off by more. On the H200 the self-test contains 1.
    for (const t of report.summary.tasks) {
      expect(t.ciLow!, t.task).toBeLessThanOrEqual(1.02);
      expect(t.ciHigh!, t.task).toBeGreaterThanOrEqual(0.98);
      expect(Math.abs(t.speedup! - 1), t.task).toBeLessThanOrEqual(0.05);
    }
  });
});

void copyFileSync;
