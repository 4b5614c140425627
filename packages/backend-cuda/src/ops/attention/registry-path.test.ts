/**
 * scaled_dot_product_attention through the op registry on a fake CUDA device: callOp reaches the dense kernel with the
 * attrs core parses, the launch gets the strides of permuted / broadcast operands read in place (copies only where the
 * layout cannot serve), the GQA group, causal and the scale; the kernel is specialised once per variant; what the kernel
 * declines is decomposed.
 */
import { callOp1, opRoute, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fake } from '../../../test/ops-fake.js';
import { registerAttentionKernels } from './register.js';

/** The dense kernel's launches: the calls the flash prefill kernel would take stay here (sdpa-via-prefill.test.ts has those). */
function device() {
  const f = fake();
  registerAttentionKernels(f.backend.opKernels!, f.cache).viaPrefill = false;
  return f;
}
const SDPA = 'scaled_dot_product_attention';

/** The launch's arguments by name (the kernel's parameter order). */
function named(args: readonly unknown[]) {
  const n = ['out', 'o_sb', 'o_sh', 'o_sr', 'q', 'q_sb', 'q_sh', 'q_sr', 'k', 'k_sb', 'k_sh', 'k_sr', 'v', 'v_sb', 'v_sh', 'v_sr', 'mask', 'm_sb', 'm_sh', 'm_sr', 'm_sc', 'L', 'S', 'group', 'causal', 'scale_log2'];
  return Object.fromEntries(n.map((k, i) => [k, args[i]]));
}

describe('scaled_dot_product_attention on the dense kernel (fake device)', () => {
  it('[B, L, H, D] views permuted to [B, H, L, D] are read in place; causal, default scale, grid and source defines', () => {
    const f = device();
    const perm = (t: Tensor) => t.permute(0, 2, 1, 3);
    const q = perm(f.t([2, 100, 8, 64]));
    const k = perm(f.t([2, 70, 8, 64]));
    const v = perm(f.t([2, 70, 8, 64]));
    expect(opRoute(SDPA, [q, k, v, null], { is_causal: true })).toEqual({ via: 'kernel' });
    const o = callOp1(SDPA, [q, k, v, null], { is_causal: true });
    expect(o.shape).toEqual([2, 8, 100, 64]);
    expect(f.copies).toHaveLength(0);
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_sdpa_dense');
    expect(l.grid).toEqual([2, 8, 2]);
    expect(l.block).toBe(128);
    expect(l.source).toMatch(/#define FK_T __nv_bfloat16\n#define FK_D 64\n#define FK_DV 64\n#define FK_WARPS 4\n#define FK_BN 64\n#define FK_QREG 1\n#define FK_MASK 0\n/);
    const a = named(l.args);
    expect(a).toMatchObject({ o_sb: 8 * 100 * 64, o_sh: 100 * 64, o_sr: 64, q_sb: 100 * 8 * 64, q_sh: 64, q_sr: 8 * 64, k_sb: 70 * 8 * 64, k_sh: 64, k_sr: 512 });
    expect(a).toMatchObject({ mask: 0, L: 100, S: 70, group: 1, causal: 1 });
    expect(a.scale_log2).toBeCloseTo(Math.LOG2E / 8, 12);
  });

  it('GQA (enable_gqa) maps heads by group; an explicit scale; a bool mask [L, S] broadcast over batch and heads', () => {
    const f = device();
    const q = f.t([2, 8, 33, 128], 'f16');
    const k = f.t([2, 2, 40, 128], 'f16');
    const v = f.t([2, 2, 40, 128], 'f16');
    const m = f.t([33, 40], 'bool');
    callOp1(SDPA, [q, k, v, m], { enable_gqa: true, scale: 0.5 });
    const l = f.cache.launches[0]!;
    expect(l.source).toContain('#define FK_T __half\n');
    expect(l.source).toContain('#define FK_MASK 1\n');
    expect(named(l.args)).toMatchObject({ group: 4, k_sb: 2 * 40 * 128, k_sh: 40 * 128, m_sb: 0, m_sh: 0, m_sr: 40, m_sc: 1, causal: 0 });
    expect(named(l.args).scale_log2).toBeCloseTo(0.5 * Math.LOG2E, 12);
  });

  it('additive masks: bf16 / f16 / f32 read as they are, f64 converted to f32; a per-head bias [H, 1, S]', () => {
    const f = device();
    const q = f.t([3, 4, 20, 96]);
    const k = f.t([3, 4, 50, 96]);
    callOp1(SDPA, [q, k, k, f.t([4, 1, 50], 'f32')]);
    expect(f.cache.launches[0]!.source).toContain('#define FK_MASK 2\n#define FK_MT float\n');
    expect(named(f.cache.launches[0]!.args)).toMatchObject({ m_sb: 0, m_sh: 50, m_sr: 0, m_sc: 1 });
    callOp1(SDPA, [q, k, k, f.t([20, 50], 'bf16')]);
    expect(f.cache.launches[1]!.source).toContain('#define FK_MT __nv_bfloat16\n');
    expect(f.copies).toHaveLength(0);
    callOp1(SDPA, [q, k, k, f.t([20, 50], 'f64')]);
    expect(f.copies).toHaveLength(1); // the conversion
    expect(f.copies[0]![0].dtype).toBe('f32');
  });

  it('copies only what cannot be read in place: a strided head dim, unaligned rows; a repeated call compiles nothing new', () => {
    const f = device();
    const q = f.t([2, 4, 30, 64]);
    const kt = f.t([2, 4, 64, 30]).transpose(2, 3); // head dim stride 30
    const vOdd = f.t([2, 4, 30, 72]).narrow(3, 4, 64); // rows 144 bytes apart, start 8 bytes in
    callOp1(SDPA, [q, kt, vOdd, null]);
    expect(f.copies).toHaveLength(2);
    callOp1(SDPA, [q, kt, vOdd, null]);
    expect(f.cache.generated.size).toBe(1);
    expect(f.cache.launches).toHaveLength(2);
  });

  it('short queries take one warp; Dv != D; wide heads take the 32-key plan; rank-2 q / k / v', () => {
    const f = device();
    callOp1(SDPA, [f.t([4, 1, 256]), f.t([4, 9, 256]), f.t([4, 9, 192]), null]);
    const l = f.cache.launches[0]!;
    expect(l.source).toMatch(/#define FK_D 256\n#define FK_DV 192\n#define FK_WARPS 1\n#define FK_BN 32\n#define FK_QREG 0\n/);
    expect(l.grid).toEqual([1, 4, 1]);
    expect(l.block).toBe(32);
    const o = callOp1(SDPA, [f.t([10, 32]), f.t([12, 32]), f.t([12, 32]), null]);
    expect(o.shape).toEqual([10, 32]);
    expect(named(f.cache.launches[1]!.args)).toMatchObject({ q_sb: 0, q_sh: 0, q_sr: 32, L: 10, S: 12, group: 1 });
  });

  it('declines f32 and head dims that are not multiples of 8: the registry decomposes them', () => {
    const f = device();
    expect(opRoute(SDPA, [f.t([2, 5, 64], 'f32'), f.t([2, 6, 64], 'f32'), f.t([2, 6, 64], 'f32'), null])).toEqual({ via: 'decomposition' });
    expect(opRoute(SDPA, [f.t([2, 5, 60]), f.t([2, 6, 60]), f.t([2, 6, 60]), null])).toEqual({ via: 'decomposition' });
    const entry = f.backend.opKernels!.get(SDPA)!;
    expect(entry.supports).toBeDefined();
  });

  it('empty outputs launch nothing; S = 0 launches (the kernel writes zeros)', () => {
    const f = device();
    expect(callOp1(SDPA, [f.t([2, 0, 64]), f.t([2, 5, 64]), f.t([2, 5, 64]), null]).shape).toEqual([2, 0, 64]);
    expect(f.cache.launches).toHaveLength(0);
    callOp1(SDPA, [f.t([2, 3, 64]), f.t([2, 0, 64]), f.t([2, 0, 64]), null]);
    expect(named(f.cache.launches[0]!.args)).toMatchObject({ L: 3, S: 0 });
  });
});
