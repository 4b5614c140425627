/**
 * capture on a pipeline folder (the tiny-flux fixture, CPU): the FLUX tasks recorded from a real generateImage run —
 * the transformer blocks once a step at the image's latent tokens and the padded T5 length, the text encoders once a
 * prompt, the VAE's pieces at the latent grid — in an index the bench reader takes (each case's inputs build).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CaptureIndexSchema, Rng, casesFromCaptures } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { baselineRegistry } from '../index.js';
import { capturePipeline } from './pipeline-capture.js';

const FIXTURE = join(import.meta.dirname, '../../fixtures/tiny-flux');
const tmp = mkdtempSync(join(tmpdir(), 'fk-pipeline-capture-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('capturePipeline', () => {
  it('records the FLUX tasks of a real run: shapes, dtypes and per-step call counts', () => {
    const req = { prompt: 'a red cube', height: 16, width: 32, steps: 3, seed: 1, maxSequenceLength: 10 };
    const r = capturePipeline({ baseline: baselineRegistry(), dir: FIXTURE, backend: cpuBackend(), dtype: 'f32', requests: [req, { ...req, seed: 2 }], outDir: tmp, model: 'tiny-flux' });
    expect(r).toMatchObject({ images: 2, steps: 6 });
    const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(r.path, 'utf8')));
    expect(index.workload).toBe('images:2:16x32:3');
    const cfg = JSON.parse(readFileSync(join(FIXTURE, 'transformer/config.json'), 'utf8')) as { num_layers: number; num_single_layers: number };
    const forwards = (id: string) => index.tasks[id]!.forward.map((f) => ({ ...f.dims, count: f.count, dtype: f.dtype }));
    // the double-stream blocks: one call a step and a layer, at the 8 x 16 latent grid's 32 tokens + 10 T5 tokens
    expect(forwards('L3/flux_transformer_block')).toEqual([{ B: 1, S: 32, D: 32, St: 10, N: 42, R2: 8, count: 2 * 3 * cfg.num_layers, dtype: 'f32' }]);
    expect(index.tasks['L2/flux_attention']!.forward.reduce((a, f) => a + f.count, 0)).toBe(2 * 3 * (cfg.num_layers + cfg.num_single_layers));
    expect(forwards('L2/timestep_embedding')).toEqual([{ B: 1, P: 32, count: 6, dtype: 'f32' }]);
    // the text encoders once a prompt, at the padded lengths (T5: max_sequence_length; CLIP: model_max_length)
    expect(forwards('L4/t5_encoder')).toEqual([{ B: 1, S: 10, count: 2, dtype: 'f32' }]);
    expect(forwards('L4/clip_text_model')).toMatchObject([{ B: 1, count: 2 }]);
    // the VAE decoder's pieces once an image
    expect(index.tasks['L2/sdxl_upsample']!.forward.reduce((a, f) => a + f.count, 0) % 2).toBe(0);
    expect(Object.keys(index.tasks)).toEqual(expect.arrayContaining(['L1/dense_attention', 'L1/flux_pos_embed', 'L2/sdxl_resnet', 'L1/conv2d', 'L1/group_norm']));
    // what bench --captures does: every captured case of every task builds its inputs with the task's own builder
    const baseline = baselineRegistry();
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32' as const, registry: baseline };
    for (const id of Object.keys(index.tasks)) {
      const task = baseline.task(id)!;
      for (const c of casesFromCaptures(task, [{ index, resolve: (f) => join(tmp, f), path: r.path }], 3)) {
        const inputs = task.makeInputs(c, ctx, new Rng(1));
        expect(inputs.length, `${id} ${c.name}`).toBe(task.inputs.length);
        for (const t of inputs) t?.dispose();
      }
    }
  });
});
