/**
 * generate-image on the CPU with the tiny-flux fixture (random weights, 2 steps): a valid PNG of the asked size, the
 * same pixels for the same seed, the --json record, the progress bar, and the UserErrors of bad flags and folders.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PassThrough } from 'node:stream';
import { UserError } from '@fastkernels/core';
import { decode } from 'fast-png';
import { afterAll, describe, expect, it } from 'vitest';
import { progressBar, runGenerateImage, type GenerateImageArgs } from './generate-image.js';

const FIXTURE = join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures/tiny-flux');
const tmp = mkdtempSync(join(tmpdir(), 'fk-genimg-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const base: GenerateImageArgs = { model: FIXTURE, prompt: 'a red cube on a table', steps: 2, size: 16, seed: 0, guidance: 3.5, maxSequenceLength: 24, out: join(tmp, 'a.png'), backend: 'cpu', dtype: 'f32', initSeed: 0 };

function run(args: Partial<GenerateImageArgs>, progress?: NodeJS.WriteStream): { out: string; err: string } {
  let out = '';
  let err = '';
  runGenerateImage({ ...base, ...args }, { out: (s) => (out += s), err: (s) => (err += s) }, progress);
  return { out, err };
}
const userError = (fn: () => unknown): UserError => {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(UserError);
    return e as UserError;
  }
  throw new Error('expected a UserError');
};

describe('generate-image (tiny FLUX pipeline on the CPU)', () => {
  it('writes an RGB PNG of the asked size; the same seed gives the same pixels, another seed others', () => {
    const r = run({ height: 16, width: 24 });
    expect(r.err).toMatch(/random weights \(init seed 0\) for transformer, vae, text_encoder, text_encoder_2/);
    expect(r.err).toMatch(/wrote .*a\.png \(24x16, \d+ bytes\): 2 steps at/);
    const a = decode(readFileSync(base.out));
    expect([a.width, a.height, a.channels, a.depth]).toEqual([24, 16, 3, 8]);
    expect(new Set(a.data).size).toBeGreaterThan(8);
    run({ height: 16, width: 24, out: join(tmp, 'b.png') });
    expect(decode(readFileSync(join(tmp, 'b.png'))).data).toEqual(a.data);
    run({ height: 16, width: 24, graphs: false, out: join(tmp, 'd.png') }); // --no-graphs: the same eager loop here
    expect(decode(readFileSync(join(tmp, 'd.png'))).data).toEqual(a.data);
    run({ height: 16, width: 24, seed: 1, out: join(tmp, 'c.png') });
    expect(decode(readFileSync(join(tmp, 'c.png'))).data).not.toEqual(a.data);
  });

  it('--json prints the run record; --progress draws a bar over the steps', () => {
    const lines: string[] = [];
    const stream = new PassThrough() as unknown as NodeJS.WriteStream;
    (stream as unknown as PassThrough).on('data', (b: Buffer) => lines.push(...b.toString().split('\n').filter(Boolean)));
    const r = run({ json: true, progress: true, out: join(tmp, 'j.png') }, stream);
    const rec = JSON.parse(r.out) as { width: number; height: number; steps: number; architecture: string; timings: { step_ms: number[]; images_per_s: number }; png_bytes: number };
    expect(rec).toMatchObject({ width: 16, height: 16, steps: 2, architecture: 'flux' });
    expect(rec.timings.step_ms.length).toBe(2);
    expect(rec.timings.images_per_s).toBeGreaterThan(0);
    expect(rec).toMatchObject({ graphs: false }); // the CPU backend has no graphs: the step ran eagerly
    expect(r.err).toBe('');
    expect(lines).toEqual([`denoising ${progressBar(0, 2)} 0/2`, expect.stringMatching(/^denoising \[#{12}-{12}\] 1\/2, [\d.]+ s\/step$/), expect.stringMatching(/^denoising \[#{24}\] 2\/2/)]);
  });

  it('bad flags and folders are UserErrors naming them', () => {
    expect(userError(() => run({ size: 18 })).message).toMatch(/image size 18 is not a multiple of 4/);
    expect(userError(() => run({ steps: 0 })).details.field).toBe('--steps');
    expect(userError(() => run({ maxSequenceLength: 600 })).details.field).toBe('--max-sequence-length');
    expect(userError(() => run({ model: join(tmp, 'none') })).message).toMatch(/no model_index.json in/);
    expect(userError(() => run({ model: join(FIXTURE, '..', 'tiny-llama') })).details.fix).toMatch(/diffusers pipeline folder/);
  });
});
