import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UserError } from '@fastkernels/core';
import { afterEach, describe, expect, it } from 'vitest';
import { renderTuningFiles } from '../../scripts/embed-tuning.mjs';
import { activateDeviceTuning, cudaTuning, deviceTuningFileFor, deviceTuningFiles, effectiveTuning, resetTuning, resolveTuning, withTuning } from './load.js';
import { REMOVED_TUNING_VARIABLES } from './removed-variables.js';
import { SECTION_NAMES, TUNING_SECTIONS } from './schema.js';

const TUNING_DIR = join(import.meta.dirname, '../../tuning');
const tmp = mkdtempSync(join(tmpdir(), 'fk-tuning-'));
function file(name: string, body: unknown): string {
  const p = join(tmp, name);
  writeFileSync(p, typeof body === 'string' ? body : JSON.stringify(body));
  return p;
}
function userError(f: () => unknown): UserError {
  try {
    f();
  } catch (e) {
    if (e instanceof UserError) return e;
    throw e;
  }
  throw new Error('expected a UserError');
}

afterEach(() => resetTuning());

describe('device tuning files (tuning/*.json)', () => {
  it('the embedded copy is the files (run npm run embed-tuning after editing one)', () => {
    expect(readFileSync(join(import.meta.dirname, 'files.generated.ts'), 'utf8')).toBe(renderTuningFiles());
    expect([...deviceTuningFiles().keys()]).toEqual(readdirSync(TUNING_DIR).filter((f) => f.endsWith('.json')).sort());
  });

  it('each validates with every key of every section', () => {
    for (const [name, f] of deviceTuningFiles()) {
      for (const s of SECTION_NAMES) expect(Object.keys(f[s]).sort(), `${name} ${s}`).toEqual(Object.keys(TUNING_SECTIONS[s].shape).sort());
    }
  });

  it('generic.json holds the H200-measured choices: the fallback (H100 included) until another device is measured', () => {
    const files = deviceTuningFiles();
    const sections = (n: string) => Object.fromEntries(SECTION_NAMES.map((s) => [s, files.get(n)![s]]));
    expect(sections('generic.json')).toEqual(sections('h200.json'));
    expect(files.get('generic.json')!.match).toEqual([]);
  });

  it('docs/tuning.md documents every key and every variable the files replaced', () => {
    const doc = readFileSync(join(import.meta.dirname, '../../../../docs/tuning.md'), 'utf8');
    for (const s of SECTION_NAMES) for (const k of Object.keys(TUNING_SECTIONS[s].shape)) expect(doc, `${s}.${k}`).toContain(`| \`${s}.${k}\` |`);
    for (const [name, { key }] of Object.entries(REMOVED_TUNING_VARIABLES)) expect(doc).toContain(`| \`${name}\` | \`${key}\` |`);
  });

  it('a file is chosen by a substring of the CUDA device name, else generic.json', () => {
    expect(deviceTuningFileFor('NVIDIA H200')).toBe('h200.json');
    expect(deviceTuningFileFor('NVIDIA H200 NVL')).toBe('h200.json');
    expect(deviceTuningFileFor('nvidia h200')).toBe('h200.json');
    expect(deviceTuningFileFor('NVIDIA H100 80GB HBM3')).toBe('generic.json');
    expect(deviceTuningFileFor(undefined)).toBe('generic.json');
  });
});

describe('FASTKERNELS_TUNING: an override file laid over the device file', () => {
  it('a partial file overrides its keys only, and says where each value came from', () => {
    const p = file('ab.json', { description: 'A/B: no GEMV', linear: { gemvMaxRows: 0 }, engine: { chainDecode: false } });
    const t = resolveTuning('NVIDIA H200', { FASTKERNELS_TUNING: p });
    expect(t.deviceFile).toBe('h200.json');
    expect(t.tuning.linear.gemvMaxRows).toBe(0);
    expect(t.tuning.engine.chainDecode).toBe(false);
    expect(t.tuning.linear.gemvUnroll).toBe(4);
    expect(t.sources['linear.gemvMaxRows']).toBe(p);
    expect(t.sources['linear.gemvUnroll']).toBe('tuning/h200.json');
  });

  it('an unknown key is an error naming the file and the key', () => {
    const p = file('typo.json', { linear: { gemvMaxRow: 0 } });
    const e = userError(() => resolveTuning(undefined, { FASTKERNELS_TUNING: p }));
    expect(e.describe()).toContain(`${p}: linear.gemvMaxRow: tuning override: unknown key`);
    const q = file('section.json', { linaer: {} });
    expect(userError(() => resolveTuning(undefined, { FASTKERNELS_TUNING: q })).details.field).toBe('linaer');
  });

  it('a bad value, bad JSON or a missing file is an error naming the file', () => {
    const bad = userError(() => resolveTuning(undefined, { FASTKERNELS_TUNING: file('bad.json', { linear: { gemvLateTrigger: 'late' } }) }));
    expect(bad.details.field).toBe('linear.gemvLateTrigger');
    expect(userError(() => resolveTuning(undefined, { FASTKERNELS_TUNING: file('cluster.json', { softmax: { clusterSize: 3 } }) })).message).toContain('expected 2, 4 or 8');
    expect(userError(() => resolveTuning(undefined, { FASTKERNELS_TUNING: file('broken.json', '{ linear: ') })).message).toContain('not valid JSON');
    const missing = userError(() => resolveTuning(undefined, { FASTKERNELS_TUNING: join(tmp, 'none.json') }));
    expect(missing.describe()).toContain('FASTKERNELS_TUNING names a file that does not exist');
  });

  it('a per-knob variable it replaced is an error that names the key and the command', () => {
    const e = userError(() => resolveTuning(undefined, { FASTKERNELS_GEMV_MAX_ROWS: '0', FASTKERNELS_PDL: '0' }));
    expect(e.message).toContain('FASTKERNELS_PDL, FASTKERNELS_GEMV_MAX_ROWS are no longer read');
    expect(e.details.fix).toContain('fastkernels tuning derive --set launch.pdl=false --set linear.gemvMaxRows=0');
    for (const { key } of Object.values(REMOVED_TUNING_VARIABLES)) {
      const [s, k] = key.split('.') as [keyof typeof TUNING_SECTIONS, string];
      expect(Object.keys(TUNING_SECTIONS[s].shape), key).toContain(k);
    }
  });
});

describe('the tuning in force', () => {
  it('is resolved on first use (generic before a device is known), then for the runtime\'s device', () => {
    expect(cudaTuning().linear.gemvMaxRows).toBe(1);
    expect(effectiveTuning().deviceFile).toBe('generic.json');
    const t = cudaTuning();
    activateDeviceTuning('NVIDIA H200');
    expect(effectiveTuning()).toMatchObject({ deviceFile: 'h200.json', device: 'NVIDIA H200' });
    expect(cudaTuning()).toBe(t); // the same objects: a section read earlier stays live
  });

  it('withTuning patches a section and puts it back; a runtime started inside keeps the patch', () => {
    withTuning('sampler', { multiCtaMinSampledRows: 8 }, () => {
      activateDeviceTuning('NVIDIA H200');
      expect(cudaTuning().sampler.multiCtaMinSampledRows).toBe(8);
    });
    expect(cudaTuning().sampler.multiCtaMinSampledRows).toBe(1);
  });
});
