import { describe, expect, it } from 'vitest';
import { UserError } from './errors.js';
import { SETTINGS, setting, settingsReport, unknownSettings } from './settings.js';

describe('settings registry', () => {
  it('typed values from the environment, defaults when unset or empty', () => {
    expect(setting('FASTKERNELS_NCCL_TIMEOUT_MS', {})).toBe(300_000);
    expect(setting('FASTKERNELS_NCCL_TIMEOUT_MS', { FASTKERNELS_NCCL_TIMEOUT_MS: '60000' })).toBe(60_000);
    expect(setting('FASTKERNELS_NCCL_BLOCKING', { FASTKERNELS_NCCL_BLOCKING: '0' })).toBe(false);
    expect(setting('FASTKERNELS_NCCL_BLOCKING', { FASTKERNELS_NCCL_BLOCKING: '' })).toBe(true);
    expect(setting('FASTKERNELS_CUDA_LIB_DIRS', { FASTKERNELS_CUDA_LIB_DIRS: '/a::/b' })).toEqual(['/a', '/b']);
    expect(setting('FASTKERNELS_CUDA_LIB_DIRS', {})).toBeUndefined();
    expect(setting('FASTKERNELS_PYTHON', { FASTKERNELS_PYTHON: '/x/python3' })).toBe('/x/python3');
  });

  it('a bad value is a UserError naming the variable, what it accepts and the default', () => {
    for (const [name, raw, accepts] of [
      ['FASTKERNELS_NCCL_TIMEOUT_MS', '5s', 'a whole number >= 1'],
      ['FASTKERNELS_NCCL_TIMEOUT_MS', '0', 'a whole number >= 1'],
      ['FASTKERNELS_CHECK_INDICES', 'true', '0 or 1'],
      ['FASTKERNELS_DEVICE', '-1', 'a whole number >= 0'],
    ] as const) {
      let err: unknown;
      try {
        setting(name, { [name]: raw });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(UserError);
      const e = err as UserError;
      expect(e.details.field).toBe(name);
      expect(e.message).toBe(`expected ${accepts}, got '${raw}'`);
      expect(e.details.fix).toContain(`set ${name} to ${accepts}`);
    }
  });

  it('the report gives every setting its value and source; internal ones are marked', () => {
    const r = settingsReport({ FASTKERNELS_TRITON_TIMEOUT_MS: '1000' });
    expect(r.map((x) => x.name)).toEqual(Object.keys(SETTINGS));
    expect(r.find((x) => x.name === 'FASTKERNELS_TRITON_TIMEOUT_MS')).toMatchObject({ value: '1000', source: 'environment' });
    expect(r.find((x) => x.name === 'FASTKERNELS_CACHE_DIR')).toMatchObject({ source: 'default', value: expect.stringContaining('.cache/fastkernels') });
    expect(r.find((x) => x.name === 'FASTKERNELS_RDZV_TOKEN')?.internal).toBe(true);
    expect(r.every((x) => x.doc.length > 0 && x.accepts.length > 0)).toBe(true);
    expect(() => settingsReport({ FASTKERNELS_NCCL_BLOCKING: 'no' })).toThrow(UserError);
  });

  it('names FASTKERNELS_* variables no setting declares', () => {
    expect(unknownSettings({ FASTKERNELS_PDL: '0', FASTKERNELS_PYTHON: 'p', HOME: '/h' })).toEqual(['FASTKERNELS_PDL']);
  });
});
