/**
 * The gated-DeltaNet launch plans and host path on the fake device: the delta rule's tiling at Qwen3-Next-80B's decode
 * shapes, the conv's decode / prefill plans, what the kernels decline (naming why), chunk_gated_delta_rule's chunked
 * kernel (f64 to its decomposition), the pools passed in place (no copy) and no host read of any tensor (the
 * launches pack device addresses only: the fake device has no memory to read).
 */
import { Tensor, callOp, opRoute } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fake } from '../../../test/ops-fake.js';
import { CONV_MAX_W, convDecline, gdnDecline, planConv, planGdn } from './gdn-plan.js';
import { registerRecurrentKernels } from './register.js';

/** Qwen3-Next-80B's gated DeltaNet: 16 q / k heads, 32 value heads of K = V = 128; conv over 8192 channels, width 4. */
const QN = { H: 16, HV: 32, K: 128, V: 128 };

describe('gated DeltaNet plans', () => {
  it("the delta rule tiles as GLA's recurrent kernel over the value heads: narrower V tiles at batch 1, one CTA a head at 256", () => {
    const p1 = planGdn({ N: 1, HV: QN.HV, K: QN.K, V: QN.V }, 4, 132);
    expect([p1.bv, p1.vec, p1.threads, ...p1.grid]).toEqual([16, 4, 256, 8, 32, 1]);
    const p256 = planGdn({ N: 256, HV: QN.HV, K: QN.K, V: QN.V }, 4, 132);
    expect([p256.bv, p256.rowsPerThread, ...p256.grid]).toEqual([64, 8, 2, 32, 256]);
    expect(p256.rowsPerThread * p256.vec).toBeLessThanOrEqual(32);
  });

  it('the conv: a thread a channel for decode (128 a CTA), 32 channels x 8 token groups for prefill', () => {
    expect(planConv(64, 8192, 1)).toEqual({ ct: 128, tg: 1, grid: [64, 64, 1] });
    expect(planConv(1, 8192, 4096)).toEqual({ ct: 32, tg: 8, grid: [256, 1, 1] });
    expect(planConv(3, 40, 5).grid).toEqual([2, 3, 1]);
  });

  it('declines f64, f64 gates, K past 1024, value heads not a multiple of q heads, a strided pool; conv dtypes, widths, mixed bias', () => {
    const base = { op: 'fused_recurrent_gated_delta_rule', dtypes: ['bf16', 'f32', 'bf16'] as const, N: 1, ...QN, pool: null };
    expect(gdnDecline(base)).toBeNull();
    expect(gdnDecline({ ...base, dtypes: ['f64', 'f64', 'f64'] })).toMatch(/f64 runs on the CPU/);
    expect(gdnDecline({ ...base, dtypes: ['bf16', 'f64', 'bf16'] })).toMatch(/g f64 \/ beta bf16/);
    expect(gdnDecline({ ...base, K: 2048 })).toMatch(/key head dim 2048/);
    expect(gdnDecline({ ...base, HV: 24, H: 16 })).toMatch(/value heads 24 must be a multiple of q \/ k heads 16/);
    expect(gdnDecline({ ...base, pool: { dtype: 'f32', slotContiguous: false } })).toMatch(/contiguous \[HV, K, V\]/);
    const conv = { op: 'causal_conv1d', dtypes: ['bf16', 'bf16', null, 'f32', null] as const, hisDType: 'bool', N: 4, W: 4 };
    expect(convDecline(conv)).toBeNull();
    expect(convDecline({ ...conv, dtypes: ['f64', 'f64', null, null, null] })).toMatch(/x f64/);
    expect(convDecline({ ...conv, dtypes: ['bf16', 'bf16', 'f32', null, null] })).toMatch(/bias f32 and weight bf16/);
    expect(convDecline({ ...conv, W: CONV_MAX_W + 1 })).toMatch(/width 17/);
    expect(convDecline({ ...conv, N: 70000 })).toMatch(/65535/);
  });

  it("the chunked kernels hold their shared memory to the device's opt-in (the launch would throw past it)", () => {
    for (const op of ['chunk_gated_delta_rule', 'chunk_kda'] as const) {
      const c = (K: number, optin?: number) => ({ op, dtypes: ['bf16', 'f32', 'bf16'] as const, N: 1, H: 4, HV: 4, K, V: 128, pool: null, ...(optin ? { sharedPerBlockOptin: optin } : {}) });
      const need = (K: number) => planGdn(c(K), 4, 1, 'chunk', op === 'chunk_kda' ? 'channel' : 'head').sharedBytes;
      const big = [128, 256, 512, 1024].find((K) => need(K) > 99 * 1024)!;
      expect(gdnDecline(c(big))).toBeNull(); // sm_90's 227 KiB when the device does not say
      expect(gdnDecline(c(big, 99 * 1024))).toMatch(/exceed the device's 101376/);
      expect(gdnDecline(c(128, 99 * 1024))).toBeNull(); // Qwen3-Next / Kimi-Linear heads fit sm_86 / sm_89
    }
  });
});

describe('GdnKernels on the fake device', () => {
  const setup = () => {
    const f = fake();
    registerRecurrentKernels(f.backend.opKernels!, f.cache, f.runtime);
    return f;
  };

  it('delta-rule decode over a pool: one launch, the pool in place with its slot stride, indices, no cu_seqlens, R = HV / H', () => {
    const f = setup();
    const D = 4;
    const [q, k] = [0, 1].map(() => f.t([D, 1, 2, 128]));
    const v = f.t([D, 1, 4, 128]);
    const [g, beta] = [0, 1].map(() => f.t([D, 1, 4]));
    const pool = f.t([8, 4, 128, 128], 'f32');
    const idx = f.t([D], 'i32');
    const [o, ...rest] = callOp('fused_recurrent_gated_delta_rule', [q!, k!, v, g!, beta!, pool, null, idx], { use_qk_l2norm_in_kernel: true });
    expect(rest).toHaveLength(0);
    expect(o!.shape).toEqual([D, 1, 4, 128]);
    expect(f.cache.launches).toHaveLength(1);
    const l = f.cache.launches[0]!;
    const a = l.args as number[];
    expect([a[21], a[23]]).toEqual([pool.storage.devicePtr, pool.storage.devicePtr]);
    expect([a[22], a[24]]).toEqual([4 * 128 * 128, 4 * 128 * 128]);
    expect([a[25], a[26]]).toEqual([0, idx.storage.devicePtr]);
    expect([a[27], a[28], a[29], a[30]]).toEqual([1, 4, 128, 2]);
    expect(a[31]).toBeCloseTo(128 ** -0.5);
    expect(l.source).toContain('#define FK_L2 1');
    expect(f.copies).toHaveLength(0);
  });

  it('chunk_gated_delta_rule: packed prefills over a pool to the chunked kernel (its shared memory planned); f64 to its decomposition', () => {
    const f = setup();
    const [q, k] = [0, 1].map(() => f.t([1, 9, 1, 16]));
    const v = f.t([1, 9, 2, 16]);
    const [g, beta] = [0, 1].map(() => f.t([1, 9, 2]));
    const pool = f.t([3, 2, 16, 16], 'f32');
    const ins = [q!, k!, v, g!, beta!, pool, f.t([3], 'i32'), f.t([2], 'i64')];
    expect(opRoute('chunk_gated_delta_rule', ins, {})).toEqual({ via: 'kernel' });
    callOp('chunk_gated_delta_rule', ins, {});
    expect(f.cache.launches.map((l) => l.entry)).toEqual(['fk_gdn_chunk']);
    expect(f.cache.launches[0]!.source).toContain('typedef long long SI_T;');
    expect(f.cache.launches[0]!.source).toContain('#define FK_C 16');
    const p = planGdn({ N: 2, HV: 2, K: 16, V: 16 }, 4, 132, 'chunk');
    expect(p.sharedBytes).toBe(4 * (2 * 16 * 16 + 3 * 16 * p.bv + (p.threads / 32) * 16 * p.bv + 2 * 16 * 16 + 2 * 16));
    const x64 = [f.t([1, 2, 1, 8], 'f64'), f.t([1, 2, 1, 8], 'f64'), f.t([1, 2, 1, 8], 'f64'), f.t([1, 2, 1], 'f64'), f.t([1, 2, 1], 'f64')];
    expect(opRoute('chunk_gated_delta_rule', [...x64, null, null, null], {})).toEqual({ via: 'decomposition' });
  });

  it("KDA (a decay a key channel): fused_recurrent_kda's decode over a pool and chunk_kda's packed prefill to fk_kda_*, g's strides passed; f64 declined with the reason", () => {
    const f = setup();
    const D = 3;
    const [q, k] = [0, 1].map(() => f.t([D, 1, 2, 128]));
    const v = f.t([D, 1, 2, 128]);
    const g = f.t([D, 2, 1, 128]).transpose(1, 2); // [D, 1, 2, 128] with the channels contiguous: read in place
    const beta = f.t([D, 1, 2]);
    const pool = f.t([5, 2, 128, 128], 'f32');
    const idx = f.t([D], 'i64');
    const [o, ...rest] = callOp('fused_recurrent_kda', [q!, k!, v, g, beta, pool, null, idx], { use_qk_l2norm_in_kernel: true });
    expect(rest).toHaveLength(0);
    expect(o!.shape).toEqual([D, 1, 2, 128]);
    const l = f.cache.launches[0]!;
    expect(l.entry).toBe('fk_kda_recurrent');
    expect(l.source).toContain('#define FK_KDA 1');
    const a = l.args as number[];
    expect(a.slice(15, 18)).toEqual([g.strides[0], g.strides[1], g.strides[2]]);
    expect([a[21], a[23], a[22], a[26]]).toEqual([pool.storage.devicePtr, pool.storage.devicePtr, 2 * 128 * 128, idx.storage.devicePtr]);
    expect(f.copies).toHaveLength(0);
    const ins = [f.t([1, 9, 1, 16]), f.t([1, 9, 1, 16]), f.t([1, 9, 2, 16]), f.t([1, 9, 2, 16]), f.t([1, 9, 2]), f.t([3, 2, 16, 16], 'f32'), f.t([3], 'i32'), f.t([2], 'i32')];
    expect(opRoute('chunk_kda', ins, {})).toEqual({ via: 'kernel' });
    callOp('chunk_kda', ins, {});
    expect(f.cache.launches[1]!.entry).toBe('fk_kda_chunk');
    const [gdn, kda] = [planGdn({ N: 2, HV: 2, K: 16, V: 16 }, 4, 132, 'chunk'), planGdn({ N: 2, HV: 2, K: 16, V: 16 }, 4, 132, 'chunk', 'channel')];
    expect(kda.sharedBytes - gdn.sharedBytes).toBe(4 * 16 * (16 - 1)); // the gate sums [C][K] instead of [C]
    const x64 = [f.t([1, 2, 1, 8], 'f64'), f.t([1, 2, 1, 8], 'f64'), f.t([1, 2, 1, 8], 'f64'), f.t([1, 2, 1, 8], 'f64'), f.t([1, 2, 1], 'f64')];
    expect(opRoute('chunk_kda', [...x64, null, null, null], {})).toEqual({ via: 'decomposition' });
    expect(opRoute('fused_recurrent_kda', [...x64, null, null, null], {})).toEqual({ unsupported: expect.stringMatching(/dtype f64: the CUDA fused_recurrent_kda kernel/) });
    expect(gdnDecline({ op: 'chunk_kda', dtypes: ['bf16', 'bf16', 'bf16'], N: 1, H: 1, HV: 1, K: 2048, V: 64, pool: null })).toMatch(/key head dim 2048: the CUDA chunk_kda kernel/);
  });

  it('causal_conv1d over the pool with a transposed x: strides passed, nothing copied; update over the pool; declines say why', () => {
    const f = setup();
    const x = f.t([1, 7, 24]).transpose(1, 2); // [1, 24, 7], channels contiguous
    const w = f.t([24, 4]);
    const pool = f.t([5, 24, 3], 'f32');
    const [y, ...rest] = callOp('causal_conv1d', [x, w, null, pool, f.t([3], 'i32'), f.t([2], 'i32'), null], { activation: 'silu' });
    expect(rest).toHaveLength(0);
    expect(y!.shape).toEqual([1, 24, 7]);
    const a = f.cache.launches[0]!.args as number[];
    expect(a.slice(4, 7)).toEqual([7 * 24, 1, 24]);
    expect([a[7], a[11]]).toEqual([pool.storage.devicePtr, pool.storage.devicePtr]);
    expect([a[18], a[19], a[20]]).toEqual([7, 24, 3]);
    expect(f.copies).toHaveLength(0);
    const [u, ...urest] = callOp('causal_conv1d_update', [f.t([4, 24]), pool, w, null, f.t([4], 'i64')], { activation: null });
    expect(urest).toHaveLength(0);
    expect(u!.shape).toEqual([4, 24]);
    expect(f.cache.launches[1]!.grid).toEqual([1, 4, 1]);
    expect(() => callOp('causal_conv1d_update', [f.t([4, 24]), pool, f.t([24, 4], 'f32'), f.t([24], 'bf16'), f.t([4], 'i64')], { activation: null })).toThrow(/bias bf16 and weight f32/);
    expect(opRoute('causal_conv1d', [f.t([1, 24, 7], 'f64'), f.t([24, 4], 'f64'), null, null, null, null, null], {})).toEqual({ unsupported: expect.stringMatching(/x f64: the CUDA causal_conv1d kernel/) });
  });
});
