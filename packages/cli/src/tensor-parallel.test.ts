import { UserError } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { tensorParallelRole, tpFlag } from './tensor-parallel.js';

const launched = (rank: number, world: number) => ({ RANK: String(rank), WORLD_SIZE: String(world), MASTER_PORT: '29500', FASTKERNELS_RDZV_TOKEN: 't' });

describe('--tp: which part this process plays', () => {
  it('--tp 1 runs as always; --tp N outside a launch relaunches itself; inside, it is a rank', () => {
    expect(tensorParallelRole(1, launched(0, 2))).toEqual({ kind: 'single' });
    expect(tensorParallelRole(2, {})).toEqual({ kind: 'parent' });
    expect(tensorParallelRole(2, launched(1, 2))).toEqual({ kind: 'rank', rank: 1, world: 2 });
  });

  it('a launch of another size, or a bad --tp, is bad input', () => {
    expect(() => tensorParallelRole(2, launched(0, 4))).toThrow(UserError);
    expect(() => tensorParallelRole(2, launched(0, 4))).toThrow(/--tp 2 inside a launch of 4 ranks/);
    expect(() => tpFlag(0)).toThrow(/--tp|from 1 to 64/);
    expect(tpFlag(undefined)).toBe(1);
  });
});
