/**
 * `fastkernels capture` on the tiny-flux pipeline folder (CPU): the text-to-image run's tasks written as an index the
 * bench reader parses, the summary table and --json; bad pipeline flags are UserErrors naming them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CaptureIndexSchema, UserError } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { runCapture, type CaptureArgs } from './capture.js';
import { recordingIo, cpuCaptureArgs, fixture, tempDir } from './e2e-fixtures.suite.js';

const FIXTURE = fixture('tiny-flux');
const tmp = tempDir('fk-capture-flux-');

function run(args: Partial<CaptureArgs>): { out: string; err: string } {
  const io = recordingIo();
  runCapture({ ...cpuCaptureArgs(FIXTURE, join(tmp, 'cap'), { dtype: 'f32', size: 16, steps: 2, maxSequenceLength: 12 }), ...args }, io);
  return { out: io.stdout, err: io.stderr };
}

describe('capture on a FLUX pipeline folder (CPU)', () => {
  it('writes the tasks of a text-to-image run, one image per --prompt', () => {
    const r = run({ prompt: ['a cat', 'a dog'] });
    expect(r.out).toMatch(/^captured 2 images \(4 denoising steps\)/);
    expect(r.out).toMatch(/L3\/flux_transformer_block\s+1 init\s+1 shapes/);
    const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(join(tmp, 'cap', 'index.json'), 'utf8')));
    expect(index.workload).toBe('images:2:16x16:2');
    expect(index.tasks['L4/t5_encoder']!.forward).toMatchObject([{ dims: { B: 1, S: 12 }, count: 2 }]);
    const j = JSON.parse(run({ json: true, out: join(tmp, 'j') }).out) as { workload: string; tasks: Record<string, { calls: number }> };
    expect(j.workload).toBe('images:1:16x16:2');
    expect(j.tasks['L4/clip_text_model']!.calls).toBe(1);
  });

  it('bad pipeline flags are UserErrors naming them', () => {
    const fieldOf = (fn: () => unknown) => {
      try {
        fn();
      } catch (e) {
        expect(e).toBeInstanceOf(UserError);
        return (e as UserError).details.field;
      }
      throw new Error('expected a UserError');
    };
    expect(fieldOf(() => run({ steps: 0 }))).toBe('--steps');
    expect(fieldOf(() => run({ prompt: [' '] }))).toBe('--prompt');
    expect(fieldOf(() => run({ size: 18 }))).toBe('--size');
  });
});
