import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BenchReportSchema } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { ROOT, gpuHostBundle, startCli } from './helpers.js';

/**
 * examples/candidates/cuda-demo on the GPU (tag `gpu`): the CUDA C++ candidates through the CLI, production shapes.
 * The set comes from the GPU-host bundle's examples/ when there is one (tools/gpu-host-bundle.mjs), else the repo.
 */
const G = { tags: ['gpu'], timeout: 900_000 };
const bundle = gpuHostBundle();
const DEMO = bundle && existsSync(join(bundle, 'examples', 'cuda-demo')) ? join(bundle, 'examples', 'cuda-demo') : join(ROOT, 'examples', 'candidates', 'cuda-demo');

describe('cuda-demo (GPU)', () => {
  it('every candidate gets its declared status; the fault does not harm the tasks after it', G, async () => {
    const args = ['bench', '--candidates', DEMO, '--backend', 'cuda', '--keep-going', '--iters', '100', '--json'];
    const r = await startCli(args, { timeoutMs: 900_000 }).result;
    if (r.code !== 0) throw new Error(`bench: exit ${r.code}\n${r.stderr.slice(-3000)}`);
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    const status = (task: string) => report.summary.tasks.find((t) => t.task === task)?.status;
    const details = (task: string) => report.results.filter((x) => x.task === task).map((x) => x.detail ?? '').join('\n');
    expect(report.complete).toBe(true);
    expect(status('L1/l2_norm'), details('L1/l2_norm')).toBe('PASSED');
    expect(status('L1/silu_and_mul'), details('L1/silu_and_mul')).toBe('INCORRECT_NUMERICAL');
    expect(status('L1/relu')).toBe('RUNTIME_ERROR');
    expect(details('L1/relu')).toMatch(/ILLEGAL_ADDRESS|illegal (memory )?address/i);
    expect(status('L1/rms_norm')).toBe('RUNTIME_ERROR');
    expect(details('L1/rms_norm')).toMatch(/failed to load: does not compile: .*L1\/rms_norm\.cu:40: identifier "inv_rsm" is undefined/);
    // The winning kernel: faster than the baseline at every production shape, the 95% CI above 1.
    for (const x of report.results.filter((y) => y.task === 'L1/l2_norm')) expect(x.ciLow!, `${x.case}: ${x.speedup}x [${x.ciLow}, ${x.ciHigh}]`).toBeGreaterThan(1);
  });

  it('the cuda stub of a task compiles and passes as written', G, async () => {
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const out = mkdtempSync(join(tmpdir(), 'fk-cuda-stub-'));
    const s = await startCli(['stubs', '--lang', 'cuda', '--out', out, '--task', 'L1/silu_and_mul,L1/rms_norm']).result;
    expect(s.code, s.stderr).toBe(0);
    const r = await startCli(['bench', '--candidates', out, '--backend', 'cuda', '--shapes', 'ci', '--json'], { timeoutMs: 600_000 }).result;
    if (r.code !== 0) throw new Error(`bench: exit ${r.code}\n${r.stderr.slice(-3000)}`);
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    for (const x of report.results) expect(x.status, `${x.task} ${x.case}: ${x.detail}`).toBe('PASSED');
  });
});
