import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BenchReportSchema } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { DEMO, cli, tempSet } from './helpers.js';

import { taskProviders, tensorParallelProvider } from '@fastkernels/model-zoo';

// What the CLI must list: every L1 task the shipped providers declare (families add tasks often: the list is the
// providers', and a few ids every release has anchor it)
const L1_TASKS = [...taskProviders, tensorParallelProvider]
  .flatMap((p) => p.tasks())
  .filter((t) => t.level === 1)
  .map((t) => t.id)
  .sort();
const ANCHORS = ['L1/rms_norm', 'L1/silu_and_mul', 'L1/paged_decode_attention', 'L1/allreduce', 'L1/conv2d', 'L1/chunk_gla', 'L1/layer_norm', 'L1/topk_softmax'];

describe('fastkernels list / info / doctor / --help / --version', () => {
  it('list prints every task with its mirrored module', () => {
    const r = cli(['list']);
    expect(r.code).toBe(0);
    for (const id of L1_TASKS) expect(r.stdout).toContain(id);
    expect(r.stdout).toContain('vllm.model_executor.layers.layernorm.RMSNorm');
    expect(r.stdout).not.toMatch(/\x1b\[/); // no colours when not a TTY
    // a task shared by many families shows the first and a count: the table stays readable
    const conv = r.stdout.split('\n').find((l) => l.startsWith('L1/conv2d '))!;
    expect(conv).toMatch(/ \+\d+ /);
    expect(Math.max(...r.stdout.split('\n').map((l) => l.length))).toBeLessThan(220);
  });

  it('list --json lists every L1 task with its mirrored module', () => {
    const r = cli(['list', '--json']);
    expect(r.code).toBe(0);
    const tasks = JSON.parse(r.stdout) as { id: string; level: number; mirrors: string; className: string }[];
    expect(tasks.filter((t) => t.level === 1).map((t) => t.id).sort()).toEqual(L1_TASKS);
    expect(L1_TASKS).toEqual(expect.arrayContaining(ANCHORS));
    for (const t of tasks) expect(t.mirrors).toMatch(/^[a-z_]+(\.[A-Za-z_0-9]+)+$/);
    expect(tasks.find((t) => t.id === 'L1/rms_norm')).toMatchObject({ className: 'RMSNorm', mirrors: 'vllm.model_executor.layers.layernorm.RMSNorm' });
    expect(r.stderr).toBe('');
  });

  it('list filters by level and family', () => {
    const l1 = JSON.parse(cli(['list', '--level', '1', '--json']).stdout) as { level: number }[];
    expect(l1).toHaveLength(L1_TASKS.length);
    expect(l1.every((t) => t.level === 1)).toBe(true);
    const all = JSON.parse(cli(['list', '--json']).stdout) as { family: string[] }[];
    const moe = all.filter((t) => t.family.some((f) => f.toLowerCase().includes('moe')));
    expect(moe.length).toBeGreaterThan(0);
    expect(moe.length).toBeLessThan(all.length); // L1/gelu and L1/group_norm serve other families
    expect(JSON.parse(cli(['list', '--family', 'moe', '--json']).stdout)).toHaveLength(moe.length);
    expect(JSON.parse(cli(['list', '--family', 'no-such-family', '--json']).stdout)).toEqual([]);
  });

  it('info shows signatures, mirrored module, shapes, tolerance and imports', () => {
    const r = cli(['info', 'L1/rms_norm']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('RMSNorm(hiddenSize: int, eps?: float');
    expect(r.stdout).toMatch(/forward\(x: act\[T, H\], residual\?: act\[T, H\]\)/);
    expect(r.stdout).toContain('vllm.model_executor.layers.layernorm.RMSNorm');
    expect(r.stdout).toMatch(/bf16\s+atol=0.01, rtol=0.01/);
    expect(r.stdout).toContain('imports:');
    expect(r.stdout).toMatch(/llama3-8b-prefill\s+bf16\s+T=4096 H=4096/);
    const j = JSON.parse(cli(['info', 'silu_and_mul', '--json']).stdout);
    expect(j).toMatchObject({ id: 'L1/silu_and_mul', className: 'SiluAndMul', signature: { constructor: 'SiluAndMul()' } });
  });

  it('doctor says which backends are available and why not', () => {
    const r = cli(['doctor']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/cpu\s+available/);
    expect(r.stdout).toMatch(/cuda\s+unavailable\s+\S+/);
    const j = JSON.parse(cli(['doctor', '--json']).stdout);
    expect(j.backends.find((b: { name: string }) => b.name === 'cpu').available).toBe(true);
    const cuda = j.backends.find((b: { name: string }) => b.name === 'cuda');
    if (!cuda.available) expect(cuda.reason).toBeTruthy();
  });

  it('--help teaches: commands, examples, exit codes; --version prints the version', () => {
    const r = cli(['--help']);
    expect(r.code).toBe(0);
    for (const c of ['list', 'info', 'stubs', 'bench', 'doctor']) expect(r.stdout).toContain(c);
    expect(r.stdout).toContain('Examples:');
    expect(r.stdout).toContain('Exit codes');
    const b = cli(['bench', '--help']);
    expect(b.code).toBe(0);
    expect(b.stdout).toContain('--candidates');
    expect(b.stdout).toContain('examples/candidates/cpu-demo');
    expect(cli(['--version']).stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });
});

describe('fastkernels bench on the cpu-demo set (the main job)', () => {
  it('prints the table with every status, the details and the summary; writes a valid --json report', () => {
    const dir = tempSet();
    const file = join(dir, 'out', 'report.json');
    const r = cli(['bench', '--candidates', DEMO, '--json', file]);
    expect(r.stderr).toBe(''); // no progress on a pipe without --progress
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/L1\/rms_norm\s+small\s+f32\s+PASSED/);
    expect(r.stdout).toMatch(/L1\/silu_and_mul\s+\S+\s+\S+\s+INCORRECT_NUMERICAL/);
    expect(r.stdout).toMatch(/L1\/embedding\s+\S+\s+\S+\s+RUNTIME_ERROR/);
    expect(r.stdout).toMatch(/speedup \[95% CI\]/);
    expect(r.stdout).toMatch(/\d+\.\d\dx \[\d+\.\d\d, \d+\.\d\d\]/);
    expect(r.stdout).toContain('Cannot mix BigInt');
    expect(r.stdout).toMatch(/L1\s+3\s+1\s+[01]\s+[01]\s+\d+\.\d\dx/);
    expect(r.stdout).toMatch(/correct 1\/3, fast_1 /);

    const report = BenchReportSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
    expect(report.complete).toBe(true);
    expect(report.backend).toBe('cpu');
    expect(new Set(report.results.map((x) => x.status))).toEqual(new Set(['PASSED', 'INCORRECT_NUMERICAL', 'RUNTIME_ERROR']));
    const rms = report.summary.tasks.find((t) => t.task === 'L1/rms_norm')!;
    expect(rms.correct).toBe(true);
    // The demo's fast candidate really is faster than the CPU baseline on the CI cases.
    expect(rms.speedup!).toBeGreaterThan(1);
    expect(report.summary.total).toMatchObject({ benched: 3, correct: 1 });
    for (const x of report.results.filter((y) => y.status === 'PASSED')) expect(x.golden?.candidate.status).toBe('PASSED');
  });

  it('bare --json prints only the report on stdout, even with --progress (progress goes to stderr)', () => {
    const r = cli(['bench', '--candidates', DEMO, '--task', 'rms_norm', '--iters', '5', '--warmup-ms', '0', '--json', '--progress']);
    expect(r.code).toBe(0);
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    expect(report.results.map((x) => x.task)).toEqual(['L1/rms_norm', 'L1/rms_norm']);
    expect(r.stderr).toMatch(/L1\/rms_norm small .*correctness/);
  });

  it('--level and --task select candidates; --iters 0 checks correctness only', () => {
    const r = cli(['bench', '--candidates', DEMO, '--task', 'L1/silu_and_mul,embedding', '--iters', '0', '--json']);
    expect(r.code).toBe(0);
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    expect([...new Set(report.results.map((x) => x.task))]).toEqual(['L1/embedding', 'L1/silu_and_mul']);
    expect(report.results.every((x) => x.speedup === null)).toBe(true);
  });
});

describe('tensor-parallel tasks (model-zoo\'s plugin)', () => {
  it('list shows them; info gives the world size; bench skips them with the reason and exit 0', () => {
    const list = JSON.parse(cli(['list', '--json']).stdout) as { id: string; className: string }[];
    for (const id of ['L1/allreduce', 'L2/column_parallel_linear', 'L2/row_parallel_linear', 'L2/qkv_parallel_linear', 'L2/merged_column_parallel_linear']) {
      expect(list.map((t) => t.id)).toContain(id);
    }
    expect(cli(['info', 'L2/row_parallel_linear']).stdout).toMatch(/world size:\s+2 ranks/);
    const dir = tempSet({
      'L1/allreduce.ts': "import { Module, type Tensor } from '@fastkernels/core';\nexport class AllReduce extends Module {\n  forward(x: Tensor): Tensor { return x.clone(); }\n}\n",
    });
    const r = cli(['bench', '--candidates', dir, '--backend', 'cpu', '--iters', '0', '--json']);
    expect(r.code).toBe(0);
    const why = 'needs a process group of world size 2; run `fastkernels bench --tp 2` (or bench under `fastkernels launch --nproc 2`) on 2 GPUs';
    // stderr's hints name the CLI as it was run; the report's detail keeps the plain name
    expect(r.stderr).toContain(`bench: skipping L1/allreduce: ${why.replaceAll('`fastkernels ', '`node packages/cli/dist/bin.js ')}`);
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    expect(report.results.length).toBeGreaterThan(0);
    for (const x of report.results) expect([x.task, x.status, x.detail]).toEqual(['L1/allreduce', 'SKIPPED', why]);
    expect(report.summary.total).toMatchObject({ benched: 0, skipped: 1 });
  });

  it('the self-test of every task leaves them out and says so', () => {
    const r = cli(['bench', '--self-test', '--level', '1', '--backend', 'cpu', '--shard', '0/12', '--iters', '0', '--json']);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/bench: leaving out L1\/allreduce: needs a process group of world size 2/);
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    expect(report.results.some((x) => x.task === 'L1/allreduce')).toBe(false);
  });
});

describe('fastkernels stubs', () => {
  it('writes skeletons that load and, with NotImplemented bodies, give RUNTIME_ERROR', () => {
    const dir = tempSet();
    const s = cli(['stubs', '--out', dir, '--level', '1']);
    expect(s.code).toBe(0);
    expect(s.stdout).toContain(`${L1_TASKS.length} stubs`);
    const stub = readFileSync(join(dir, 'L1/rms_norm.ts'), 'utf8');
    expect(stub).toContain('export class RMSNorm extends Module');
    expect(stub).toMatch(/constructor\(hiddenSize: number, eps: number = /);
    expect(stub).toContain('forward(x: Tensor, residual?: Tensor | null)');
    expect(stub).toContain('weight [64] f32');

    const r = cli(['bench', '--candidates', dir, '--iters', '0', '--json']);
    expect(r.code).toBe(0);
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    expect(new Set(report.results.map((x) => x.task)).size).toBe(L1_TASKS.length);
    for (const x of report.results) {
      if (x.task === 'L1/allreduce') continue; // needs a process group: skipped (below)
      expect(x.status).toBe('RUNTIME_ERROR');
      expect(x.detail).toContain('NotImplemented');
    }
  });

  it('refuses to overwrite without --force (exit 2), and --task picks one task', () => {
    const dir = tempSet();
    expect(cli(['stubs', '--out', dir, '--task', 'softmax']).code).toBe(0);
    const again = cli(['stubs', '--out', dir, '--task', 'softmax']);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('L1/softmax.ts: already exists');
    expect(again.stderr).toContain('--force');
    expect(cli(['stubs', '--out', dir, '--task', 'softmax', '--force']).code).toBe(0);
  });
});
