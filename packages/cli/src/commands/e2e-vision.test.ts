/**
 * `fastkernels e2e` and `capture` on vision folders (CPU, tiny fixtures): --self-test on ConvNeXt-V2 agrees exactly
 * and prints images/s and batch latency with intervals per batch size; a YOLOv10 candidate SiLU that adds 1 fails
 * correctness naming the batch; capture writes an index whose cases build as bench --captures builds them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { runCapture } from './capture.js';
import { runE2e } from './e2e.js';
import { recordingIo as io, cpuCaptureArgs, cpuE2eArgs, expectCasesBuild, fixture, offsetCandidate, tempDir, writeFiles } from './e2e-fixtures.suite.js';

const CONVNEXT = fixture('tiny-convnextv2');
const YOLO = fixture('tiny-yolov10');
const tmp = tempDir('fk-cli-e2e-vision-');

const base = cpuE2eArgs(CONVNEXT, { dtype: 'f32' });

describe('fastkernels e2e on a vision folder (CPU)', () => {
  it('--self-test (ConvNeXt-V2): exact agreement, images/s and batch latency with intervals per batch size, the --out record', async () => {
    const out = join(tmp, 'self.json');
    const o = io();
    await runE2e({ ...base, selfTest: true, batchSizes: '1,2', images: 3, out }, o);
    expect(o.stdout).toMatch(/3 images at 32x32 \(logits, head \[1, 5\]\), eager; candidates: none/);
    expect(o.stdout).toMatch(/batch {4}1 {2}images\/s {2}baseline [\d.]+ \[[\d.-]+, [\d.]+\]/);
    expect(o.stdout).toMatch(/batch {4}2 {2}images\/s/);
    expect(o.stdout).toMatch(/correct {4}yes; head max rel err 0\.00e\+0; top-k equal 6\/6/);
    const rec = JSON.parse(readFileSync(out, 'utf8')) as { mode: string; correctness: { passed: boolean }; bySize: { batch: number; baseline: { batchMs: { n: number } } }[] };
    expect(rec).toMatchObject({ mode: 'self-test', correctness: { passed: true } });
    expect(rec.bySize.map((s) => [s.batch, s.baseline.batchMs.n])).toEqual([[1, 9], [2, 6]]);
  });

  it('a wrong candidate (YOLOv10, an L1/silu that adds 1) fails correctness naming the batch', async () => {
    const dir = writeFiles(join(tmp, 'cands'), {
      'L1/silu.ts': offsetCandidate({ cls: 'SiLU', base: 'nn.SiLU', imports: "import { nn } from '@fastkernels/model-zoo';", addend: '1' }),
    });
    const o = io();
    await runE2e({ ...base, model: YOLO, candidates: dir, batchSizes: '1', images: 1, repeats: 1 }, o);
    expect(o.stdout).toMatch(/candidates: L1\/silu/);
    expect(o.stdout).toMatch(/correct {4}no: batch size 1, batch 0 \(images 0-0\): head output max \|diff\|/);
  }, 120_000);

  it('--batch-sizes must name positive integers', async () => {
    await expect(runE2e({ ...base, selfTest: true, batchSizes: '0' }, io())).rejects.toThrow(UserError);
  });
});

describe('fastkernels capture on a vision folder (CPU)', () => {
  it('writes the ConvNeXt-V2 tasks of one batch per --batch-sizes, cases bench --captures builds', () => {
    const outDir = join(tmp, 'cap');
    const o = io();
    runCapture(cpuCaptureArgs(CONVNEXT, outDir, { dtype: 'f32', batchSizes: '1,2' }), o);
    expect(o.stdout).toMatch(/^captured 3 images at 32x32 \(batch sizes 1, 2\)/);
    const { workload, ids } = expectCasesBuild(outDir);
    expect(workload).toBe('images:32x32:bs=1,2');
    expect(ids).toEqual(expect.arrayContaining(['L1/grn', 'L2/convnextv2_block', 'L1/conv2d']));
  });
});
