/**
 * YOLOv10 end to end on the CPU: the registry entry reads the tiny fixture's config.json, a seeded random checkpoint in
 * ultralytics' names (init-weights' path) loads back by path, the model matches the float64 reference (reference.ts,
 * plain loops) on the loaded tensors, fuse() (BN folded, RepVGGDW merged) leaves the outputs as they were, detect()'s
 * NMS-free top-k equals ultralytics' v10postprocess on the same predictions, and an ultralytics checkpoint's training-only
 * tensors (one-to-many head, the DFL's arange) are read past.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng, Tensor, toHostArray, withContext, type HostArray } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { userError } from '../../../test/user-error.js';
import { randn } from '../../common/inputs.js';
import { baselineRegistry } from '../../index.js';
import { loadModel, loadModelConfig, loadVisionModel, writeRandomModelCheckpoint } from '../../models/load-model.js';
import { SafetensorsFile, writeSafetensors } from '../../weights/safetensors.js';
import { parseYOLOv10Config } from './config.js';
import { yolov10Layers } from './graph.js';
import type { YOLOv10ForObjectDetection } from './L4/yolov10.js';
import { YOLOConv } from './L2/yolov10_conv.js';
import { SiLU } from '../../layers/activation.js';
import { refPostprocess, refYOLOv10 } from './reference.js';

const FIXTURE = join(import.meta.dirname, '../../../fixtures/tiny-yolov10');
const tmp = mkdtempSync(join(tmpdir(), 'fk-yolo-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const raw = JSON.parse(readFileSync(join(FIXTURE, 'config.json'), 'utf8')) as Record<string, unknown>;
const cfg = parseYOLOv10Config(raw);

/** Relative max error of a tensor against a float64 reference (scaled by the reference's largest magnitude). */
function relErr(t: Tensor, ref: HostArray): number {
  const a = t.toFloat64Array();
  const scale = Math.max(...ref.data.map(Math.abs));
  return Math.max(...a.map((v, i) => Math.abs(v - ref.data[i]!))) / scale;
}

describe('YOLOv10 through the model registry', () => {
  it('resolves YOLOv10ForObjectDetection to the vision runner; a bad field is a UserError naming it', () => {
    const r = loadModelConfig(join(FIXTURE, 'config.json'));
    expect(r.architecture.name).toBe('yolov10');
    expect(r.architecture.runner).toBe('vision');
    expect(cfg).toMatchObject({ scale: 'n', nc: 4, widthMultiple: 0.125, depthMultiple: 0.33, maxChannels: 1024, maxDet: 20, imgsz: 64, dtype: 'f32', initializerRange: null, initializerGain: 1 });
    const e = userError(() => parseYOLOv10Config({ ...raw, imgsz: 100 }, 'c.json'));
    expect(e.message).toMatch(/invalid field imgsz in c\.json: must be a multiple of 32/);
    expect(userError(() => parseYOLOv10Config({ scale: 'q' }, 'c.json')).message).toMatch(/invalid field scale in c\.json/);
    // names: a list or ultralytics' {id: name} dict, one per class
    expect(cfg.names).toBeNull();
    expect(parseYOLOv10Config({ ...raw, names: ['a', 'b', 'c', 'd'] }).names).toEqual(['a', 'b', 'c', 'd']);
    expect(parseYOLOv10Config({ ...raw, names: { 1: 'b', 0: 'a', 3: 'd', 2: 'c' } }).names).toEqual(['a', 'b', 'c', 'd']);
    expect(userError(() => parseYOLOv10Config({ ...raw, names: ['a'] }, 'c.json')).message).toMatch(/invalid field names in c\.json: 1 names for nc 4 classes/);
    expect(userError(() => parseYOLOv10Config({ ...raw, names: { 0: 'a', 1: 'b', 2: 'c', 5: 'd' } }, 'c.json')).message).toMatch(/no name for class 3/);
  });

  it('yolov10n / s / m channels follow parse_model (width, max_channels, C2fCIB placement)', () => {
    const ch = (scale: 'n' | 's' | 'm') => yolov10Layers(parseYOLOv10Config({ scale })).map((l) => l.c2);
    expect(ch('n').slice(0, 11)).toEqual([16, 32, 32, 64, 64, 128, 128, 256, 256, 256, 256]);
    expect(ch('m').slice(0, 11)).toEqual([48, 96, 96, 192, 192, 384, 384, 576, 576, 576, 576]);
    const n = yolov10Layers(parseYOLOv10Config({ scale: 'n' }));
    expect(n[4]!.args).toEqual([64, 64, 2, true]); // C2f repeats round(6 * 0.33) = 2
    expect(n[22]).toMatchObject({ module: 'C2fCIB', args: [384, 256, 1, true, true] });
    expect(n[23]!.args).toEqual([80, [64, 128, 256]]);
    expect(yolov10Layers(parseYOLOv10Config({ scale: 's' }))[8]!.module).toBe('C2fCIB');
    expect(yolov10Layers(parseYOLOv10Config({ scale: 'm' }))[19]).toMatchObject({ module: 'C2fCIB', args: [576, 384, 2, true] });
  });

  it('a random checkpoint in ultralytics names loads back and matches the float64 reference; fuse() keeps the outputs; detect() is v10postprocess', () => {
    const dir = join(tmp, 'ckpt');
    const registry = baselineRegistry();
    const w = writeRandomModelCheckpoint(dir, raw, { seed: 5, dtype: 'f32', registry, calibrateOn: cpuBackend() });
    expect(w.architecture).toBe('yolov10');
    const file = SafetensorsFile.open(join(dir, 'model.safetensors'));
    const names = [...file.tensors.keys()];
    file.close();
    for (const n of ['model.0.conv.weight', 'model.0.bn.running_var', 'model.2.m.0.cv1.conv.weight', 'model.10.attn.qkv.bn.bias', 'model.10.ffn.1.conv.weight', 'model.22.m.0.cv1.2.conv1.conv.weight', 'model.23.one2one_cv2.0.2.bias', 'model.23.one2one_cv3.2.0.0.conv.weight']) expect(names).toContain(n);
    expect(names.some((n) => /^(backbone|neck|head)\./.test(n) || n.includes('dfl'))).toBe(false);

    const loaded = loadVisionModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' });
    expect(loaded.weights).toBe('checkpoint');
    const model = loaded.model as YOLOv10ForObjectDetection;
    const params = new Map(model.namedParameters().map(([k, t]) => [k.replace(/^(backbone|neck)\./, 'model.').replace(/^head\./, 'model.23.'), toHostArray(t)] as const));
    // image-like inputs: pixels / 255 in [0, 1), as calibration draws them
    const images = Tensor.fromArray(loaded.ctx.backend, new Rng(7).fillUniform(2 * 3 * 64 * 64, 0, 1), [2, 3, 64, 64], 'f32');
    const ref = refYOLOv10(yolov10Layers(cfg), toHostArray(images), params, cfg.nc);
    const preds = withContext(loaded.ctx, () => model.forward(images));
    expect([...preds.shape]).toEqual([2, 8, 8 * 8 + 4 * 4 + 2 * 2]);
    expect(relErr(preds, ref)).toBeLessThan(1e-4); // f32 through ~60 calibrated BatchNorms
    // not a degenerate random model (per-fan-in init, BatchNorm calibrated): scores neither saturated nor all
    // sigmoid(bias), boxes off the uniform-DFL grid (anchor centre +- 7.5 strides)
    const scores = ref.data.filter((_, i) => Math.floor(i / 84) % 8 >= 4).sort((a, b) => a - b);
    const q = (f: number) => scores[Math.floor(f * (scores.length - 1))]!;
    expect(q(0.1)).toBeGreaterThan(0.01);
    expect(q(0.9)).toBeLessThan(0.99);
    expect(q(0.9) - q(0.1)).toBeGreaterThan(0.2);

    // config.json alone: the same seed drawn and calibrated in memory gives the checkpoint's model
    const random = loadVisionModel(FIXTURE, { backend: cpuBackend(), registry, dtype: 'f32', initSeed: 5 });
    expect(random.weights).toBe('random');
    const again = withContext(random.ctx, () => random.model.forward(images));
    expect(relErr(again, ref)).toBeLessThan(1e-5);
    again.dispose();
    random.model.dispose();

    const det = withContext(loaded.ctx, () => model.detect(images));
    const want = refPostprocess(toHostArray(preds), cfg.nc, cfg.maxDet);
    expect([...det.boxes.shape]).toEqual([2, 20, 4]);
    expect(det.classes.dtype).toBe('i64');
    expect([...det.classes.toFloat64Array()]).toEqual([...want.classes]);
    expect(relErr(det.scores, { shape: [2, 20], data: want.scores })).toBeLessThan(1e-6);
    expect(relErr(det.boxes, { shape: [2, 20, 4], data: want.boxes })).toBeLessThan(1e-6);

    const before = model.namedParameters().length;
    withContext(loaded.ctx, () => model.fuse());
    const after = model.namedParameters().map(([k]) => k);
    expect(after.some((k) => k.includes('.bn.'))).toBe(false);
    expect(after.some((k) => k.includes('conv1'))).toBe(false); // RepVGGDW's 3x3 branch merged into the 7x7
    expect(after.length).toBeLessThan(before);
    const fused = withContext(loaded.ctx, () => model.forward(images));
    expect(relErr(fused, ref)).toBeLessThan(1e-4);
    // every Conv block with a SiLU now runs it as one conv2d_act, unless a candidate (or a capture) stands in its SiLU
    const convBlocks = model.namedModules().map(([, m]) => m).filter((m): m is YOLOConv => m instanceof YOLOConv && m.act !== null);
    expect(convBlocks.length).toBeGreaterThan(5);
    expect(convBlocks.every((m) => m.fusesConvSilu())).toBe(true);
    const block = convBlocks[0]!;
    const own = block.act!;
    const CandidateSiLU = class extends SiLU {
      override forward(x: Tensor): Tensor {
        return super.forward(x);
      }
    };
    (block as unknown as { act: SiLU }).act = withContext(loaded.ctx, () => new CandidateSiLU());
    expect(block.fusesConvSilu()).toBe(false);
    (block as unknown as { act: SiLU }).act = own;
    withContext(loaded.ctx, () => model.fuse()); // idempotent
    for (const t of [images, preds, fused, det.boxes, det.scores, det.classes]) t.dispose();
    model.dispose();
  });

  it("an ultralytics checkpoint's one-to-many head and DFL arange are read past; a missing tensor is named; generate refuses the model", () => {
    const src = join(tmp, 'ckpt2');
    const registry = baselineRegistry();
    writeRandomModelCheckpoint(src, raw, { seed: 9, dtype: 'f32', registry });
    const f = SafetensorsFile.open(join(src, 'model.safetensors'));
    const entries = [...f.tensors.values()].map((t) => ({ name: t.name, dtype: t.dtype!, shape: t.shape, bytes: () => f.readBytes(t.name) }));
    const extra = (name: string, shape: number[]) => ({ name, dtype: 'f32' as const, shape, bytes: () => new Uint8Array(shape.reduce((a, b) => a * b, 1) * 4) });
    writeSafetensors(join(tmp, 'full.safetensors'), [...entries, extra('model.23.cv2.0.2.bias', [64]), extra('model.23.cv3.1.2.weight', [4, 32, 1, 1]), extra('model.23.dfl.conv.weight', [1, 16, 1, 1]), extra('model.0.bn.num_batches_tracked', [])]);
    writeSafetensors(join(tmp, 'missing.safetensors'), entries.filter((e) => e.name !== 'model.6.cv2.bn.weight'));
    f.close();
    for (const [name, ok] of [['full', true], ['missing', false]] as const) {
      const dir = join(tmp, name);
      writeRandomModelCheckpoint(dir, raw, { seed: 1, dtype: 'f32', registry }); // config.json
      rmSync(join(dir, 'model.safetensors'));
      writeSafetensors(join(dir, 'model.safetensors'), (() => {
        const g = SafetensorsFile.open(join(tmp, `${name}.safetensors`));
        const out = [...g.tensors.values()].map((t) => ({ name: t.name, dtype: t.dtype!, shape: t.shape, bytes: () => g.readBytes(t.name) }));
        return out;
      })());
      if (ok) loadVisionModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' }).model.dispose();
      else expect(userError(() => loadVisionModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' })).message).toMatch(/model\.6\.cv2\.bn\.weight/);
    }
    expect(userError(() => loadModel(FIXTURE, { backend: cpuBackend(), registry })).message).toMatch(/vision model \(yolov10\)|does not generate text/);
  });
});
