import { afterEach, describe, expect, it } from 'vitest';
import { envChoice, envCount, envSwitch } from './env-settings.js';
import { UserError } from './errors.js';

const NAME = 'FASTKERNELS_TEST_ENV_SETTING';

describe('envSwitch / envCount / envChoice: speed settings from the environment', () => {
  afterEach(() => {
    delete process.env[NAME];
  });
  it('unset or empty: the fallback', () => {
    expect(envSwitch(NAME, true)).toBe(true);
    expect(envSwitch(NAME, false)).toBe(false);
    process.env[NAME] = '';
    expect(envCount(NAME, 3)).toBe(3);
  });
  it('0 and 1 override either way', () => {
    process.env[NAME] = '0';
    expect(envSwitch(NAME, true)).toBe(false);
    expect(envCount(NAME, 3)).toBe(0);
    process.env[NAME] = '1';
    expect(envSwitch(NAME, false)).toBe(true);
    expect(envCount(NAME, 0)).toBe(1);
  });
  for (const bad of ['yes', 'true', '2', ' 1']) {
    it(`switch '${bad}': an error that names the variable and the fix`, () => {
      process.env[NAME] = bad;
      let err: unknown;
      try {
        envSwitch(NAME, true);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(UserError);
      expect((err as UserError).describe()).toBe(`${NAME}: expected 0 or 1, got '${bad}'\nfix: set ${NAME} to 0 or 1, or unset it for the default (1)`);
    });
  }
  it('count: a range, named in the error and the fix', () => {
    process.env[NAME] = '17';
    let err: unknown;
    try {
      envCount(NAME, 8, 0, 16);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UserError);
    expect((err as UserError).describe()).toBe(`${NAME}: expected a whole number from 0 to 16, got '17'\nfix: set ${NAME} to a whole number from 0 to 16, or unset it for the default (8)`);
    process.env[NAME] = '16';
    expect(envCount(NAME, 8, 0, 16)).toBe(16);
  });
  it('count: a minimum', () => {
    process.env[NAME] = '0';
    expect(() => envCount(NAME, 8, 1)).toThrowError(/expected a whole number >= 1, got '0'/);
    process.env[NAME] = '4';
    expect(envCount(NAME, 8, 1)).toBe(4);
  });
  for (const bad of ['-1', '1.5', 'eight', '1e3']) {
    it(`count '${bad}': an error`, () => {
      process.env[NAME] = bad;
      expect(() => envCount(NAME, 0)).toThrowError(/expected a whole number/);
    });
  }
  it('choice: one of the names, else an error that lists them', () => {
    expect(envChoice(NAME, ['off', 'glu'] as const, 'off')).toBe('off');
    process.env[NAME] = 'glu';
    expect(envChoice(NAME, ['off', 'glu'] as const, 'off')).toBe('glu');
    process.env[NAME] = 'GLU';
    expect(() => envChoice(NAME, ['off', 'glu'] as const, 'off')).toThrowError(/expected one of off, glu, got 'GLU'/);
  });
});
