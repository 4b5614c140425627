/**
 * `fastkernels generate --tp 2` on 2 GPUs (tag gpu): the greedy tokens of --tp 1, and a rank killed mid-run ends the
 * run promptly with the launcher's message and the killed rank's exit code (no hang). `e2e --tp 2 --self-test`: outcome
 * ok, 100% agreement, one report (rank 0). `bench --tp 2` (and bench under `launch --nproc 2`): L1/allreduce in the
 * process group of the ranks' bench workers: the baseline PASSED, a copy (no communication) INCORRECT_NUMERICAL.
 * `serve --tp 2`: serve-tp.gpu.test.ts.
 * Runs the bundle's CLI on the GPU host (`dist/gpu-host/run-gpu-tests tensor-parallel`), the repo's built CLI
 * elsewhere. The 8B-shape version (bf16, decode tok/s at bs 1 and 32) is bench/run tp (bench/suites/tp); the self-tests of
 * the next 2-GPU session, bench/run verify-tp.
 */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { BIN, gpuHostBundle, startCli } from './helpers.js';
import { needGpus, tokenDiff, writeTinyTpModel } from './tp/gpu-fixture.js';

const G = { tags: ['gpu'], timeout: 600_000 };

let model: string;
let prompts: string;
let work: string;

beforeAll(() => {
  const dir = mkdtempSync(join(tmpdir(), 'fk-tp-gpu-'));
  work = dir;
  model = join(dir, 'model');
  writeTinyTpModel(model);
  prompts = join(dir, 'prompts.jsonl');
  writeFileSync(prompts, [[1, 2, 3, 4, 5], [9, 8, 7], [100, 200, 300, 400], [42]].map((p) => JSON.stringify({ prompt_ids: p })).join('\n') + '\n');
});

/** The pid of rank `rank` among the children of the CLI process `parent` (the launcher spawns the ranks). */
function rankPid(parent: number, rank: number): number | undefined {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== parent) continue;
      if (readFileSync(`/proc/${name}/environ`, 'utf8').split('\0').includes(`RANK=${rank}`)) return Number(name);
    } catch {
      /* gone */
    }
  }
  return undefined;
}

describe('generate --tp on 2 GPUs', () => {
  it('--tp 2 gives the greedy tokens of --tp 1 (float32, 4 prompts x 32 tokens)', G, async () => {
    needGpus(2);
    const args = ['generate', '--model', model, '--prompt-file', prompts, '--max-tokens', '32', '--backend', 'cuda', '--dtype', 'f32', '--json'];
    const one = await startCli(args, { timeoutMs: 300_000 }).result;
    expect(one.code, one.stderr).toBe(0);
    const two = await startCli([...args, '--tp', '2'], { timeoutMs: 300_000 }).result;
    expect(two.code, two.stderr).toBe(0);
    const [a, b] = [JSON.parse(one.stdout), JSON.parse(two.stdout)]; // only rank 0 printed: one JSON document
    expect(b.tp).toBe(2);
    const diff = tokenDiff(a.outputs.map((o: { token_ids: number[] }) => o.token_ids), b.outputs.map((o: { token_ids: number[] }) => o.token_ids));
    expect(diff, `${diff}\n--tp 2 log:\n${two.stderr.split('\n').slice(-15).join('\n')}`).toBe('');
  });

  it('killing rank 1 mid-run stops rank 0 promptly with a clear error and exit code 137', G, async () => {
    needGpus(2);
    const args = ['generate', '--model', model, '--prompt-file', prompts, '--max-tokens', '8000', '--backend', 'cuda', '--dtype', 'f32', '--tp', '2'];
    const run = startCli(args, { timeoutMs: 300_000, env: { FASTKERNELS_NCCL_TIMEOUT_MS: '60000' } });
    let stderr = '';
    await new Promise<void>((resolve) => {
      run.child.stderr!.on('data', (d: Buffer) => {
        stderr += d.toString();
        if (/^model /m.test(stderr)) resolve(); // rank 0 has loaded its shard and starts generating
      });
      void run.result.then(() => resolve());
    });
    await new Promise((r) => setTimeout(r, 300));
    const victim = rankPid(run.child.pid!, 1);
    expect(victim, `rank 1 of CLI pid ${run.child.pid} not found; stderr:\n${stderr}`).toBeDefined();
    const t0 = Date.now();
    process.kill(victim!, 'SIGKILL');
    const r = await run.result;
    const seconds = (Date.now() - t0) / 1000;
    expect(r.stderr).toMatch(new RegExp(`rank 1 \\(pid ${victim}\\) was killed by SIGKILL; stopping the other 1 rank`));
    expect(r.code).toBe(137);
    expect(seconds).toBeLessThan(30);
  });
});

describe('e2e --tp 2 on 2 GPUs', () => {
  it('--self-test: outcome ok, 100% agreement, one line and one report (rank 0), decode graphs or a logged fallback', G, async () => {
    needGpus(2);
    const out = join(work, 'e2e-tp2.json');
    const r = await startCli([
      'e2e', '--model', model, '--self-test', '--backend', 'cuda', '--dtype', 'f32', '--tp', '2', '--requests', 'synthetic:8:4-32:4-16:0',
      '--latency-batch-sizes', '1,4', '--latency-prompt', '16', '--latency-output', '8', '--warmups', '1', '--repeats', '1',
      '--max-model-len', '256', '--max-num-seqs', '8', '--num-kv-blocks', '64', '--out', out,
    ], { timeoutMs: 500_000 }).result;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toHaveLength(1); // rank 1 printed nothing
    expect(r.stdout).toMatch(/^model: ok, .*exact agreement 8\/8/);
    expect(r.stderr).toMatch(/CUDA graphs: (decode batch sizes .* captured|off under tensor parallelism \(.+\))/);
    const report = JSON.parse(readFileSync(out, 'utf8'));
    expect(report.gpu_count).toBe(2);
    expect(report.models[0].outcome).toBe('ok');
    expect(report.models[0].discrepancies.every((d: number) => d === 0)).toBe(true);
  });
});

describe('bench of L1/allreduce in a process group of 2 GPUs', () => {
  type Report = { options: { processGroup?: number }; results: { task: string; case: string; status: string; speedup: number | null; detail?: string }[] };
  const allreduceRows = (stdout: string) => (JSON.parse(stdout) as Report).results.filter((x) => x.task === 'L1/allreduce');

  it('bench --tp 2 --self-test: every case PASSED with a speedup; one report', G, async () => {
    needGpus(2);
    const r = await startCli(['bench', '--self-test', '--task', 'allreduce', '--backend', 'cuda', '--tp', '2', '--shapes', 'all', '--iters', '20', '--json'], { timeoutMs: 500_000 }).result;
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as Report; // only rank 0 printed: one JSON document
    expect(report.options.processGroup).toBe(2);
    const rows = allreduceRows(r.stdout);
    expect(rows.length).toBe(5);
    for (const x of rows) {
      expect(x.status, `${x.case}: ${x.detail}`).toBe('PASSED');
      expect(x.speedup).toBeGreaterThan(0);
    }
  });

  it('under `fastkernels launch --nproc 2`: the same; a candidate that does not communicate is INCORRECT_NUMERICAL', G, async () => {
    needGpus(2);
    const cands = join(work, 'copy-allreduce');
    mkdirSync(join(cands, 'L1'), { recursive: true });
    writeFileSync(join(cands, 'L1', 'allreduce.ts'), "import { Module, type Tensor } from '@fastkernels/core';\nexport class AllReduce extends Module {\n  forward(x: Tensor): Tensor { return x.clone(); }\n}\n");
    const bundle = gpuHostBundle();
    const cliCmd = bundle ? [join(bundle, 'run')] : [process.execPath, BIN];
    const r = await startCli(['launch', '--nproc', '2', '--', ...cliCmd, 'bench', '--candidates', cands, '--backend', 'cuda', '--shapes', 'ci', '--iters', '5', '--json'], { timeoutMs: 500_000 }).result;
    expect(r.code, r.stderr).toBe(0);
    const rows = allreduceRows(r.stdout);
    expect(rows.length).toBe(2);
    for (const x of rows) expect(x.status, `${x.case}: ${x.detail}`).toBe('INCORRECT_NUMERICAL');
  });
});
