import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { infoCommand } from '../commands/info.js';
import { recordedBaselineTimes, sameCase } from './baseline-times.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const row = (kase: string, T: number, ms: number, options: Record<string, unknown> = {}) => ({
  task: 'L1/rms_norm', case: kase, dtype: 'bf16', dims: { T, H: 4096 }, init: [4096, 1e-5], options, status: 'ok', ms, torchEagerMs: ms * 3, torchCompiledMs: ms * 2,
});

/** A results folder with two device runs (dated by their history) and a malformed one. */
function resultsFolder(): { dir: string; msOld: number; msNew: number } {
  const dir = mkdtempSync(join(tmpdir(), 'fk-results-'));
  dirs.push(dir);
  const msOld = 0.01 + Math.random() * 0.1;
  const msNew = 0.01 + Math.random() * 0.1;
  const put = (dev: string, file: unknown, history: unknown[]) => {
    mkdirSync(join(dir, dev));
    writeFileSync(join(dir, dev, 'kernels.json'), typeof file === 'string' ? file : JSON.stringify(file));
    writeFileSync(join(dir, dev, 'history.jsonl'), history.map((h) => JSON.stringify(h)).join('\n') + '\nnot json\n');
  };
  put('a-old', { commit: '1111111aaaa', gpu: 'GPU Old', rows: [row('fused-T32', 32, msOld, { residual: true }), { ...row('x', 1, 1), task: 'L1/softmax' }] }, [{ date: '2026-10-01', suite: 'kernels' }]);
  put('b-new', { commit: '2222222bbbb', gpu: 'GPU New', rows: [row('fused-T32', 32, msNew, { residual: true }), row('plain-T4096', 4096, msNew * 4), { ...row('failed', 8, 1), status: 'error' }] }, [
    { date: '2026-11-01', suite: 'kernels' },
    { date: '2026-12-24', suite: 'serve' },
  ]);
  put('c-bad', '{"gpu": 3}', []);
  return { dir, msOld, msNew };
}

describe('recorded baseline times (bench/results/<device>/kernels.json)', () => {
  it('reads every device folder, newest kernels run first, skips rows of other tasks and failed rows, names files that do not parse', () => {
    const { dir, msOld, msNew } = resultsFolder();
    const { runs, skipped } = recordedBaselineTimes('L1/rms_norm', [dir]);
    expect(runs.map((r) => [r.file, r.device, r.commit, r.date])).toEqual([['b-new/kernels.json', 'GPU New', '2222222', '2026-11-01'], ['a-old/kernels.json', 'GPU Old', '1111111', '2026-10-01']]);
    expect(runs[0]!.rows.map((r) => [r.case, r.ms, r.torchMs])).toEqual([['fused-T32', msNew, msNew * 2], ['plain-T4096', msNew * 4, msNew * 8]]);
    expect(runs[1]!.rows.map((r) => r.ms)).toEqual([msOld]);
    expect(skipped).toHaveLength(1);
    expect(skipped[0]).toMatch(/c-bad\/kernels\.json: gpu: /);
  });

  it('matches a recorded row to a task case by dtype, shared dims and options', () => {
    const r = { case: 'x', dtype: 'bf16', dims: { T: 32, H: 4096 }, options: { residual: true }, ms: 1, torchMs: null };
    expect(sameCase(r, { dtype: 'bf16', dims: { T: 32, H: 4096 }, options: { residual: true } })).toBe(true);
    expect(sameCase(r, { dtype: 'bf16', dims: { T: 32, H: 4096 }, options: {} })).toBe(false);
    expect(sameCase(r, { dtype: 'f32', dims: { T: 32, H: 4096 }, options: { residual: true } })).toBe(false);
    expect(sameCase(r, { dtype: 'bf16', dims: { T: 33, H: 4096 }, options: { residual: true } })).toBe(false);
  });
});

describe('fastkernels info', () => {
  const run = (argv: Record<string, unknown>) => {
    let out = '';
    (infoCommand({ out: (t) => void (out += t), err: () => {} }).handler as (a: unknown) => void)(argv);
    return out;
  };

  it('shows per language what to implement, the dtypes and tolerance, and the newest recorded baseline time', () => {
    const { dir, msNew } = resultsFolder();
    const text = run({ task: 'rms_norm', results: dir });
    expect(text).toMatch(/TypeScript: L1\/rms_norm\.ts:\n\s+export class RMSNorm extends Module/);
    expect(text).toMatch(/CUDA C\+\+: L1\/rms_norm\.cu with its binding L1\/rms_norm\.cu\.json[^\n]*\n\s+extern "C" __global__ void rms_norm_bf16\(const scalar_t\* x, const scalar_t\* residual, const scalar_t\* weight, scalar_t\* out_y, scalar_t\* out_residual, int T, int H, int hiddenSize, float eps\)/);
    expect(text).toMatch(/names in grid \/ block \/ args expressions: dims T, H; constructor hiddenSize, eps; dtype/);
    expect(text).toMatch(/Triton: L1\/rms_norm\.ts launching[^\n]*_rms_norm_triton\.py/);
    expect(text).toMatch(/PyTorch: L1\/rms_norm\.py[^\n]*\n\s+class RMSNorm\(torch\.nn\.Module\):\n\s+def __init__\(self, hidden_size, eps=0\.000001\)\n\s+def forward\(self, x, residual=None\)/);
    expect(text).toMatch(/bf16\s+atol=0\.01, rtol=0\.01/);
    expect(text).toContain('baseline time, last recorded run (b-new/kernels.json: GPU New, 2026-11-01, commit 2222222):');
    expect(text).toMatch(new RegExp(`fused-T32\\s+bf16\\s+T=32 H=4096\\s+${msNew.toFixed(4)}\\s+${(msNew * 2).toFixed(4)}\\s+llama3-8b-decode`));
  });

  it('says so when no run recorded the task; --json carries the languages and the runs', () => {
    const { dir } = resultsFolder();
    expect(run({ task: 'L1/l2_norm', results: dir })).toMatch(/baseline time: no recorded GPU run has L1\/l2_norm/);
    const j = JSON.parse(run({ task: 'L1/rms_norm', results: dir, json: true }));
    expect(Object.keys(j.languages)).toEqual(['ts', 'cuda', 'triton', 'torch']);
    expect(j.baselineTimes[0].file).toBe('b-new/kernels.json');
  });
});
