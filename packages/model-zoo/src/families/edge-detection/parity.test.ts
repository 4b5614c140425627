/**
 * Parity against the PyTorch oracles (bench/reference/convnextv2_ref.py, yolov10_ref.py: plain-torch modules written
 * from HF's ConvNextV2ForImageClassification and ultralytics' YOLOv10 that load our checkpoints strictly by their
 * production names). Our CPU backend in f32 and the reference in float64 run the same seeded checkpoint on the same
 * input tensors (a .safetensors file both sides read; no image preprocessing in between). Skipped, saying why, where
 * no Python here imports torch (CI installs Debian's python3-torch).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng, Tensor, withContext } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { parityError, readF32, referencePython, runReference, writeF32 } from '../../../test/torch-reference.js';
import { baselineRegistry } from '../../index.js';
import { loadVisionModel, writeRandomModelCheckpoint } from '../../models/load-model.js';

const FIXTURES = join(import.meta.dirname, '../../../fixtures');
const PYTHON = referencePython('the ConvNeXt-V2 / YOLOv10 PyTorch parity tests');
const tmp = mkdtempSync(join(tmpdir(), 'fk-vision-parity-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function run(fixture: string, script: string, seed: number, shape: number[], lo: number, hi: number, outName: string, over: Record<string, unknown> = {}) {
  const raw = { ...(JSON.parse(readFileSync(join(FIXTURES, fixture, 'config.json'), 'utf8')) as Record<string, unknown>), ...over };
  const label = [fixture, ...Object.values(over)].join('-');
  const dir = join(tmp, label);
  const registry = baselineRegistry();
  writeRandomModelCheckpoint(dir, raw, { seed, dtype: 'f32', registry, calibrateOn: cpuBackend() });
  const loaded = loadVisionModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' });
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Rng(seed + 100).fillUniform(n, lo, hi);
  const inputs = join(tmp, `${label}-inputs.safetensors`);
  writeF32(inputs, { pixel_values: { shape, data } });
  const images = Tensor.fromArray(loaded.ctx.backend, data, shape, 'f32');
  const ours = withContext(loaded.ctx, () => loaded.model.forward(images));
  const out = join(tmp, `${label}-ref.safetensors`);
  runReference(PYTHON!, script, ['--model', dir, '--inputs', inputs, '--out', out, '--dtype', 'float64']);
  const ref = readF32(out, outName);
  expect([...ours.shape]).toEqual(ref.shape);
  const err = parityError(ours, ref);
  const got = ours.toFloat64Array();
  console.log(`${label} parity (ours CPU f32 vs ${script} float64): max |diff| ${err.abs.toExponential(2)}, relative to max |ref| ${err.scale.toFixed(3)}: ${err.rel.toExponential(2)}`);
  images.dispose();
  ours.dispose();
  loaded.model.dispose();
  return { ...err, got, ref };
}

describe.skipIf(!PYTHON)('vision models against the PyTorch oracle (CPU, f32 vs float64)', () => {
  it('ConvNeXt-V2 logits (tiny-convnextv2, 3 images 32x32)', () => {
    // f32 through ~15 LayerNorm / GRN / GELU layers of width <= 64 gives ~1e-7 relative (seen: 1.1e-7); 1e-5 leaves
    // two orders for summation order while even the GRN's eps moved 1e-6 -> 1e-3 in the reference gives 1.7e-4 (fails)
    const err = run('tiny-convnextv2', 'convnextv2_ref.py', 3, [3, 3, 32, 32], -2, 2, 'logits');
    expect(err.rel).toBeLessThan(1e-5);
  }, 300_000);
});

describe.skipIf(!PYTHON)('YOLOv10 against the PyTorch oracle (CPU, f32 vs float64)', () => {
  // n: C2f at 8, C2fCIB with RepVGGDW at 22; s: C2fCIB with RepVGGDW at 8 too; m: C2fCIB without it at 8, 19, 22,
  // depth 0.67 (tiny-yolov10's width 0.125; m's max_channels 768 needs 0.1875 for PSA's c // 64 >= 1 head)
  it.each([['n', 0.125], ['s', 0.125], ['m', 0.1875]] as const)('yolov10%s raw head outputs before postprocess (width %s, 2 images 64x64 in [0, 1))', (scale, width) => {
    // boxes in pixels (scale ~ 64 and up) and sigmoid scores through 60-110 calibrated BatchNorms, folded into the
    // convs at load (f32): seen 4.2e-6 / 3.2e-6 / 1.6e-5 (n / s / m) of the largest box coordinate; 1e-4 (as
    // model.test.ts's float64 loop reference), while BatchNorm eps 1e-4 instead of ultralytics' 1e-3 in the reference
    // gives 0.45
    const err = run('tiny-yolov10', 'yolov10_ref.py', 5, [2, 3, 64, 64], 0, 1, 'preds', { scale, width_multiple: width });
    expect(err.rel).toBeLessThan(1e-4);
    // the scores on their own (rows 4.. of [B, 4 + nc, A]), absolute: sigmoids in (0, 1), seen 6.4e-6 / 3.5e-6 /
    // 3.2e-5 apart (n / s / m; torch's own f32 run of the m model: 5.5e-6); 1e-4 bounds that
    const [, rows, A] = err.ref.shape as [number, number, number];
    let scoreDiff = 0;
    err.ref.data.forEach((v, i) => {
      if (Math.floor(i / A) % rows >= 4) scoreDiff = Math.max(scoreDiff, Math.abs(v - err.got[i]!));
    });
    console.log(`tiny-yolov10-${scale} scores: max |diff| ${scoreDiff.toExponential(2)}`);
    expect(scoreDiff).toBeLessThan(1e-4);
  }, 300_000);
});
