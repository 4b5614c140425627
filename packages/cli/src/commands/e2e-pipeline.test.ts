/**
 * `fastkernels e2e` on the tiny-flux pipeline folder (CPU): --self-test agrees exactly (latents at every step, images
 * equal) and prints the images/s and step-latency rows with intervals; a candidate FeedForward that adds 1 fails
 * correctness at a named step; the --out record.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runE2e } from './e2e.js';
import { recordingIo as io, cpuE2eArgs, fixture, offsetCandidate, tempDir, writeFiles } from './e2e-fixtures.suite.js';

const FLUX = fixture('tiny-flux');
const tmp = tempDir('fk-cli-e2e-flux-');

const base = cpuE2eArgs(FLUX, { dtype: 'f32', repeats: 2, size: 16, steps: 2, maxSequenceLength: 10 });

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
    const dir = writeFiles(join(tmp, 'cands'), {
      'L2/flux_feedforward.ts': offsetCandidate({
        cls: 'FeedForward', base: 'Baseline', imports: "import { FeedForward as Baseline } from '@fastkernels/model-zoo';", addend: '1',
        ctor: { params: "dim: number, dimOut: number | null = null, mult = 4, activationFn = 'gelu-approximate', innerDim: number | null = null, bias = true", args: 'dim, dimOut, mult, activationFn, innerDim, bias' },
      }),
    });
    const o = io();
    await runE2e({ ...base, candidates: dir, repeats: 1 }, o);
    expect(o.stdout).toMatch(/candidates: L2\/flux_feedforward/);
    expect(o.stdout).toMatch(/correct\s+no: request 0 step \d: latents max \|diff\|/);
  });
});
