/**
 * `fastkernels e2e` on the tiny-flux pipeline folder (CPU): --self-test agrees exactly (latents at every step, images
 * equal) and prints the images/s and step-latency rows with intervals; a candidate FeedForward that adds 1 fails
 * correctness at a named step; the --out record.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runE2e, type E2eArgs } from './e2e.js';

const ROOT = resolve(import.meta.dirname, '../../../..');
const FLUX = join(ROOT, 'packages/model-zoo/fixtures/tiny-flux');
const tmp = mkdtempSync(join(tmpdir(), 'fk-cli-e2e-flux-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const io = () => {
  const o = { stdout: '', stderr: '', out: (t: string) => void (o.stdout += t), err: (t: string) => void (o.stderr += t) };
  return o;
};
const base: E2eArgs = {
  model: FLUX, backend: 'cpu', dtype: 'f32', maxNumSeqs: 4, maxNumBatchedTokens: 32, gpuMemoryUtilization: 0.9, graphs: true, workload: 'all',
  requests: 'synthetic:1:1-1:1-1:0', latencyBatchSizes: '1', latencyPrompt: 8, latencyOutput: 3, warmups: 1, repeats: 2, timeout: 600,
  size: 16, steps: 2, maxSequenceLength: 10,
};

describe('fastkernels e2e on a FLUX pipeline folder (CPU)', () => {
  it('--self-test: exact agreement, images/s and step latency with intervals, the --out record', async () => {
    const out = join(tmp, 'self.json');
    const o = io();
    await runE2e({ ...base, selfTest: true, prompt: ['a cat', 'a dog'], out }, o);
    expect(o.stdout).toMatch(/2 images at 16x16, 2 steps; candidates: none/);
    expect(o.stdout).toMatch(/images\/s\s+baseline [\d.]+ \[[\d.-]+, [\d.]+\]/);
    expect(o.stdout).toMatch(/correct\s+yes; latents max rel err 0\.00e\+0/);
    const rec = JSON.parse(readFileSync(out, 'utf8')) as { mode: string; correctness: { passed: boolean; psnr: (number | null)[]; stepErrors: number[][] }; baseline: { stepMs: { n: number } } };
    expect(rec).toMatchObject({ mode: 'self-test', correctness: { passed: true, psnr: [null, null] } });
    expect(rec.correctness.stepErrors).toEqual([[0, 0], [0, 0]]);
    expect(rec.baseline.stepMs.n).toBe(2 * 2 * 2);
  });

  it('a wrong candidate fails correctness at a named step', async () => {
    const dir = join(tmp, 'cands');
    mkdirSync(join(dir, 'L2'), { recursive: true });
    writeFileSync(join(dir, 'L2/flux_feedforward.ts'), `import { OpScope, type Tensor } from '@fastkernels/core';
import { FeedForward as Baseline } from '@fastkernels/model-zoo';
export class FeedForward extends Baseline {
  constructor(dim: number, dimOut: number | null = null, mult = 4, activationFn = 'gelu-approximate', innerDim: number | null = null, bias = true) {
    super(dim, dimOut, mult, activationFn, innerDim, bias);
  }
  override forward(x: Tensor): Tensor {
    const s = new OpScope();
    const y = s.own(super.forward(x));
    return s.keep([s.op('add', [y, 1])])[0]!;
  }
}
`);
    const o = io();
    await runE2e({ ...base, candidates: dir, repeats: 1 }, o);
    expect(o.stdout).toMatch(/candidates: L2\/flux_feedforward/);
    expect(o.stdout).toMatch(/correct\s+no: request 0 step \d: latents max \|diff\|/);
  });
});
