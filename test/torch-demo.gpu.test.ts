import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BenchReportSchema, type BenchReport } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { ROOT, gpuHostBundle, startCli } from './helpers.js';

/**
 * PyTorch candidates on the GPU (tag `gpu`): examples/candidates/torch-demo, the torch stubs and the Python side-stream
 * exploit through the CLI with --backend cuda: the worker maps the harness's device buffers through CUDA IPC and times
 * with CUDA events. The GPU host's Python with torch is found as on any machine (FASTKERNELS_PYTHON, python3, the
 * torch venv). Sets come from the GPU-host bundle (tools/gpu-host-bundle.mjs) when there is one, else the repo.
 */
const G = { tags: ['gpu'], timeout: 900_000 };
const bundle = gpuHostBundle();
const from = (bundled: string, repo: string) => (bundle && existsSync(join(bundle, bundled)) ? join(bundle, bundled) : join(ROOT, repo));
const DEMO = from('examples/torch-demo', 'examples/candidates/torch-demo');
const SIDE_STREAM = from('exploits/py-side-stream', 'test/exploits/py-side-stream');

async function bench(args: string[]): Promise<BenchReport> {
  const r = await startCli(['bench', '--backend', 'cuda', '--json', ...args], { timeoutMs: 900_000 }).result;
  if (r.code !== 0) throw new Error(`bench: exit ${r.code}\n${r.stderr.slice(-3000)}`);
  return BenchReportSchema.parse(JSON.parse(r.stdout));
}

describe('PyTorch candidates (GPU)', () => {
  it('torch-demo: every candidate gets its declared status, timed by the worker\'s CUDA events', G, async () => {
    const report = await bench(['--candidates', DEMO, '--keep-going', '--iters', '100']);
    const status = (task: string) => report.summary.tasks.find((t) => t.task === task)?.status;
    const details = (task: string) => report.results.filter((x) => x.task === task).map((x) => x.detail ?? '').join('\n');
    expect(report.complete).toBe(true);
    expect(status('L1/rms_norm'), details('L1/rms_norm')).toBe('PASSED');
    expect(status('L1/silu_and_mul'), details('L1/silu_and_mul')).toBe('INCORRECT_NUMERICAL');
    expect(status('L1/relu')).toBe('RUNTIME_ERROR');
    expect(details('L1/relu')).toMatch(/relu\.py:17: IndexError/);
    for (const x of report.results.filter((y) => y.task === 'L1/rms_norm')) expect(x.checks).toContain('worker-clock');
  });

  it('the torch stubs (reference PyTorch ops) pass as written at the production shapes', G, async () => {
    const out = mkdtempSync(join(tmpdir(), 'fk-torch-stub-'));
    const s = await startCli(['stubs', '--lang', 'torch', '--out', out, '--task', 'L1/silu_and_mul,L1/rms_norm,L1/relu']).result;
    expect(s.code, s.stderr).toBe(0);
    const report = await bench(['--candidates', out, '--shapes', 'production', '--iters', '100']);
    for (const x of report.results) expect(x.status, `${x.task} ${x.case}: ${x.detail}`).toBe('PASSED');
  });

  it('py-side-stream: work left on a side stream is caught by the escape check', G, async () => {
    // production shapes: the side stream's work must outlast the launches (which the events see too)
    const report = await bench(['--candidates', SIDE_STREAM, '--shapes', 'production', '--iters', '50']);
    const rows = report.results.filter((x) => x.task === 'L1/rms_norm');
    expect(rows.some((x) => x.status === 'REWARD_HACK' && /work escaped the timed window/.test(x.detail ?? '')), JSON.stringify(rows.map((x) => [x.case, x.status, x.detail]))).toBe(true);
  });
});
