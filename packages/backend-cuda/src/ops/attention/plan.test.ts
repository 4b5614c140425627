/** The dense SDPA kernel's plan (tiles per head dim, grid, shared memory) and what it declines, without a GPU. */
import { describe, expect, it } from 'vitest';
import { denseSdpaDecline, planDenseSdpa, type DenseSdpaCall } from './plan.js';

const shape = (D: number, Dv = D, L = 100, S = 77) => ({ batch: 3, heads: 8, L, S, D, Dv });

describe('planDenseSdpa', () => {
  it('up to 128 dims: 4 warps of 16 rows, 64-key tiles, Q in registers', () => {
    for (const D of [32, 64, 80, 96, 128]) {
      const p = planDenseSdpa(shape(D));
      expect(p, `D ${D}`).toMatchObject({ warps: 4, rowsPerCta: 64, keysPerTile: 64, qInRegisters: true, block: 128 });
      expect(p.grid).toEqual([2, 8, 3]); // ceil(100 / 64) query tiles, heads, batch
    }
  });

  it('wider heads: 32-key tiles, Q re-read from shared memory; the shared memory fits the opt-in (227 KB) and the 2-CTA budget', () => {
    for (const D of [144, 192, 256]) {
      const p = planDenseSdpa(shape(D));
      expect(p, `D ${D}`).toMatchObject({ warps: 4, keysPerTile: 32, qInRegisters: false });
    }
    expect(planDenseSdpa(shape(256)).sharedBytes).toBe(2 * (64 * 264 + 4 * 32 * 264));
    expect(planDenseSdpa(shape(256)).sharedBytes).toBeLessThanOrEqual(227 * 1024 / 2);
    // a wide value head alone makes the plan wide (the O accumulators are Dv / 2 a thread)
    expect(planDenseSdpa(shape(64, 256))).toMatchObject({ keysPerTile: 32, qInRegisters: false, paddedD: 64, paddedDv: 256 });
  });

  it('head dims pad to 16 (the pad zero-filled); rows pitched 16 bytes past the padded width', () => {
    const p = planDenseSdpa(shape(40, 72));
    expect(p).toMatchObject({ paddedD: 48, paddedDv: 80 });
    expect(p.sharedBytes).toBe(2 * (64 * 56 + 2 * 64 * 56 + 2 * 64 * 88));
  });

  it('queries that fit 16 rows take one warp a CTA; L = 0 still plans one tile (the runner launches nothing)', () => {
    expect(planDenseSdpa(shape(128, 128, 1))).toMatchObject({ warps: 1, rowsPerCta: 16, block: 32, grid: [1, 8, 3] });
    expect(planDenseSdpa(shape(128, 128, 16)).warps).toBe(1);
    expect(planDenseSdpa(shape(128, 128, 17))).toMatchObject({ warps: 4, grid: [1, 8, 3] });
    expect(planDenseSdpa(shape(64, 64, 0)).grid[0]).toBe(1);
  });
});

describe('denseSdpaDecline', () => {
  const base: DenseSdpaCall = { ...shape(128), dtype: 'bf16', kDtype: 'bf16', vDtype: 'bf16', dropout: 0 };
  it('takes bf16 / f16 at head dims that are multiples of 8 in [8, 256], Dv != D included', () => {
    expect(denseSdpaDecline(base)).toBeNull();
    expect(denseSdpaDecline({ ...base, dtype: 'f16', kDtype: 'f16', vDtype: 'f16' })).toBeNull();
    for (const D of [8, 32, 40, 80, 96, 192, 256]) expect(denseSdpaDecline({ ...base, D, Dv: 64 }), `D ${D}`).toBeNull();
  });
  it('declines, saying why: f32 / f64, mixed dtypes, dropout, head dims off the grid, grid limits', () => {
    expect(denseSdpaDecline({ ...base, dtype: 'f32', kDtype: 'f32', vDtype: 'f32' })).toMatch(/dtype f32.*bf16 \/ f16/);
    expect(denseSdpaDecline({ ...base, kDtype: 'f16' })).toMatch(/one dtype/);
    expect(denseSdpaDecline({ ...base, dropout: 0.1 })).toMatch(/dropout_p 0.1/);
    expect(denseSdpaDecline({ ...base, D: 100 })).toMatch(/query\/key head dim 100/);
    expect(denseSdpaDecline({ ...base, Dv: 264 })).toMatch(/value head dim 264/);
    expect(denseSdpaDecline({ ...base, D: 0 })).toMatch(/head dim 0/);
    expect(denseSdpaDecline({ ...base, heads: 70000 })).toMatch(/65535/);
    expect(denseSdpaDecline({ ...base, batch: 70000 })).toMatch(/65535/);
  });
});
