/**
 * ConvNeXt-V2 end to end on the CPU: the registry entry reads the tiny fixture's config.json (HF's fields, id2label), a
 * seeded random checkpoint in HF's names (init-weights' path) loads back by path and matches the float64 reference
 * (reference.ts, plain loops) on the loaded tensors; random weights per fan-in give logits that depend on the image;
 * bad config fields are UserErrors naming them.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng, toHostArray, withContext, type HostArray, type Tensor } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../../test/l1-harness.js';
import { userError } from '../../../../test/user-error.js';
import { randn } from '../../../common/inputs.js';
import { baselineRegistry } from '../../../index.js';
import { loadModelConfig, loadVisionModel, writeRandomModelCheckpoint } from '../../../models/load-model.js';
import { SafetensorsFile } from '../../../weights/safetensors.js';
import { CONVNEXTV2_BASE_384, parseConvNextV2Config } from './config.js';
import { refConvNextV2 } from './reference.js';

const FIXTURE = join(import.meta.dirname, '../../../../fixtures/tiny-convnextv2');
const tmp = mkdtempSync(join(tmpdir(), 'fk-convnextv2-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const raw = JSON.parse(readFileSync(join(FIXTURE, 'config.json'), 'utf8')) as Record<string, unknown>;
const cfg = parseConvNextV2Config(raw);

function relErr(t: Tensor, ref: HostArray): number {
  const a = t.toFloat64Array();
  const scale = Math.max(...ref.data.map(Math.abs));
  return Math.max(...a.map((v, i) => Math.abs(v - ref.data[i]!))) / scale;
}

describe('ConvNeXt-V2 through the model registry', () => {
  it('resolves ConvNextV2ForImageClassification to the vision runner; HF fields and defaults; bad fields are UserErrors', () => {
    const r = loadModelConfig(join(FIXTURE, 'config.json'));
    expect(r.architecture.name).toBe('convnextv2');
    expect(r.architecture.runner).toBe('vision');
    expect(cfg).toMatchObject({ numStages: 2, hiddenSizes: [8, 16], depths: [2, 1], imageSize: 32, numLabels: 5, id2label: ['cat', 'dog', 'bird', 'fish', 'frog'], layerNormEps: 1e-12, dtype: 'f32' });
    expect(CONVNEXTV2_BASE_384).toMatchObject({ hiddenSizes: [128, 256, 512, 1024], depths: [3, 3, 27, 3], patchSize: 4, imageSize: 384, numLabels: 1000, hiddenAct: 'gelu' });
    expect(parseConvNextV2Config({}).numLabels).toBe(2); // PretrainedConfig's default
    expect(userError(() => parseConvNextV2Config({ ...raw, depths: [2, 1, 1] }, 'c.json')).message).toMatch(/invalid field depths in c\.json: has 3 entries, num_stages is 2/);
    expect(userError(() => parseConvNextV2Config({ ...raw, image_size: 36 }, 'c.json')).message).toMatch(/invalid field image_size in c\.json: 36 must be a multiple of .* 8/);
    expect(userError(() => parseConvNextV2Config({ ...raw, hidden_act: 'swish' }, 'c.json')).message).toMatch(/invalid field hidden_act/);
    expect(userError(() => parseConvNextV2Config({ ...raw, num_labels: 3 }, 'c.json')).message).toMatch(/invalid field num_labels in c\.json: is 3, id2label has 5/);
  });

  it('a random checkpoint in HF names loads back and matches the float64 reference; its logits depend on the image', () => {
    const dir = join(tmp, 'ckpt');
    const registry = baselineRegistry();
    const w = writeRandomModelCheckpoint(dir, raw, { seed: 3, dtype: 'f32', registry });
    expect(w.architecture).toBe('convnextv2');
    const file = SafetensorsFile.open(join(dir, 'model.safetensors'));
    const names = [...file.tensors.keys()];
    const shapeOf = (n: string) => file.tensors.get(n)!.shape;
    for (const n of ['convnextv2.embeddings.patch_embeddings.weight', 'convnextv2.embeddings.layernorm.bias', 'convnextv2.encoder.stages.0.layers.1.dwconv.weight', 'convnextv2.encoder.stages.1.downsampling_layer.0.weight', 'convnextv2.encoder.stages.1.downsampling_layer.1.bias', 'convnextv2.encoder.stages.1.layers.0.grn.weight', 'convnextv2.layernorm.weight', 'classifier.bias']) expect(names).toContain(n);
    expect(shapeOf('convnextv2.encoder.stages.1.layers.0.grn.weight')).toEqual([1, 1, 1, 64]);
    expect(shapeOf('convnextv2.encoder.stages.0.layers.0.pwconv1.weight')).toEqual([32, 8]);
    expect(shapeOf('convnextv2.encoder.stages.0.layers.0.dwconv.weight')).toEqual([8, 1, 7, 7]);
    expect(names.some((n) => n.startsWith('pooler') || n.includes('downsampling_layer') && n.includes('stages.0'))).toBe(false);
    expect(names).toHaveLength(4 + 3 * 10 + 4 + 4); // stem, 3 blocks, 1 downsampling, pooler norm + classifier
    // per-fan-in init: LayerNorms as torch initialises them, GRN drawn (not HF's zeros)
    const values = (n: string) => {
      const t = file.tensors.get(n)!;
      return new Float32Array(file.readBytes(n).slice().buffer, 0, t.shape.reduce((a, b) => a * b, 1));
    };
    expect([...values('convnextv2.layernorm.weight')].every((v) => v === 1)).toBe(true);
    expect([...values('convnextv2.encoder.stages.1.downsampling_layer.0.bias')].every((v) => v === 0)).toBe(true);
    expect([...values('convnextv2.encoder.stages.1.layers.0.grn.weight')].some((v) => v !== 0)).toBe(true);
    file.close();

    const loaded = loadVisionModel(dir, { backend: cpuBackend(), registry, dtype: 'f32' });
    expect(loaded.weights).toBe('checkpoint');
    expect(loaded.model.labels).toEqual(['cat', 'dog', 'bird', 'fish', 'frog']);
    expect(loaded.model.preprocess).toMatchObject({ kind: 'resize', cropPct: 0.875, resample: 'bicubic' });
    const params = new Map(loaded.model.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
    const images = withContext(loaded.ctx, () => randn(loaded.ctx, new Rng(7), [3, 3, 32, 32], 'f32'));
    const logits = withContext(loaded.ctx, () => loaded.model.forward(images));
    expect([...logits.shape]).toEqual([3, 5]);
    const ref = refConvNextV2(toHostArray(images), params, cfg);
    expect(relErr(logits, ref)).toBeLessThan(1e-5);
    // not degenerate: each image's logits differ from the others' by O(1)
    const l = ref.data;
    const diff = Math.max(...[0, 1, 2, 3, 4].map((j) => Math.abs(l[j]! - l[5 + j]!)));
    expect(diff).toBeGreaterThan(0.1);
    expect(Math.max(...l.map(Math.abs))).toBeLessThan(20);

    // config.json alone: the same seed's weights drawn in memory
    const random = loadVisionModel(FIXTURE, { backend: cpuBackend(), registry, dtype: 'f32', initSeed: 3 });
    expect(random.weights).toBe('random');
    const again = withContext(random.ctx, () => random.model.forward(images));
    expect(relErr(again, ref)).toBeLessThan(1e-6);
    for (const t of [images, logits, again]) t.dispose();
    loaded.model.dispose();
    random.model.dispose();
  });
});
