/**
 * `fastkernels e2e` and `capture` on vision folders (CPU, tiny fixtures): --self-test on ConvNeXt-V2 agrees exactly
 * and prints images/s and batch latency with intervals per batch size; a YOLOv10 candidate SiLU that adds 1 fails
 * correctness naming the batch; capture writes an index whose cases build as bench --captures builds them.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { UserError } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { capturedCasesFor, loadCaptures } from '../bench/captures.js';
import { environment } from '../env.js';
import { runCapture, type CaptureArgs } from './capture.js';
import { runE2e, type E2eArgs } from './e2e.js';

const FIXTURES = join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures');
const CONVNEXT = join(FIXTURES, 'tiny-convnextv2');
const YOLO = join(FIXTURES, 'tiny-yolov10');
const tmp = mkdtempSync(join(tmpdir(), 'fk-cli-e2e-vision-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const io = () => {
  const o = { stdout: '', stderr: '', out: (t: string) => void (o.stdout += t), err: (t: string) => void (o.stderr += t) };
  return o;
};
const base: E2eArgs = {
  model: CONVNEXT, backend: 'cpu', dtype: 'f32', maxNumSeqs: 4, maxNumBatchedTokens: 32, gpuMemoryUtilization: 0.9, graphs: true, workload: 'all',
  requests: 'synthetic:1:1-1:1-1:0', latencyBatchSizes: '1', latencyPrompt: 8, latencyOutput: 3, warmups: 1, repeats: 3, timeout: 600,
};

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
    const dir = join(tmp, 'cands');
    mkdirSync(join(dir, 'L1'), { recursive: true });
    writeFileSync(join(dir, 'L1/silu.ts'), `import { OpScope, type Tensor } from '@fastkernels/core';
import { nn } from '@fastkernels/model-zoo';
export class SiLU extends nn.SiLU {
  override forward(x: Tensor): Tensor {
    const s = new OpScope();
    const y = s.own(super.forward(x));
    return s.keep([s.op('add', [y, 1])])[0]!;
  }
}
`);
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
    runCapture({ model: CONVNEXT, out: outDir, workload: 'synthetic:1:1-1:1-1:0', backend: 'cpu', dtype: 'f32', batchSizes: '1,2' } as CaptureArgs, o);
    expect(o.stdout).toMatch(/^captured 3 images at 32x32 \(batch sizes 1, 2\)/);
    const caps = loadCaptures(outDir);
    expect(caps.indexes[0]!.index.workload).toBe('images:32x32:bs=1,2');
    const ids = Object.keys(caps.indexes[0]!.index.tasks);
    expect(ids).toEqual(expect.arrayContaining(['L1/grn', 'L2/convnextv2_block', 'L1/conv2d']));
    const env = environment();
    for (const id of ids) expect(capturedCasesFor(env.taskMap.get(id)!, caps, 64).length, id).toBeGreaterThan(0);
  });
});
