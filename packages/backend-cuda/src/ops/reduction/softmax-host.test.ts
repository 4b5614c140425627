/**
 * The host side of softmax / log_softmax on softmax.cu, on a fake device (no GPU): which kernel a shape launches, with
 * which defines, grid, block and dynamic shared memory, and the registry route (f32 / f16 / bf16 in and out take these
 * kernels, other dtypes the generated ones).
 */
import { OpKernelTable, Tensor, callOp1 } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { fakeDevice } from '../../../test/fake-device.js';
import type { CudaRuntime } from '../../runtime.js';
import { GenKernelCache } from '../gen-cache.js';
import { registerGeneratedKernels } from '../register.js';
import { lastSoftmaxLaunch, softmax } from './softmax.js';

/** A fake sm_90 device with an H100's 132 SMs and 227 KiB of shared memory a block (the fake's own props are sm_80). */
function hopper() {
  const f = fakeDevice();
  (f.ctx.runtime as unknown as { properties: () => object }).properties = () => ({ major: 9, multiprocessors: 132, sharedPerBlockOptin: 232448 });
  // sm_90 with launch.pdl: eager launches queue their PDL build for the next capture (none here)
  Object.assign(f.ctx, { compileBeforeCapture: () => {}, ops: f.backend.ops });
  return f;
}

describe('softmax.cu launches (fake sm_90 device)', () => {
  it('log_softmax [256, 128256] bf16 (the ops bench case): fk_softmax_smem, 8 CTAs a row, 32064-byte slices in shared memory', () => {
    const { backend, ctx, launches } = hopper();
    const x = Tensor.empty(backend, [256, 128256], 'bf16');
    const y = softmax(ctx, x, -1, { log: true });
    expect(y.dtype).toBe('bf16');
    expect(launches).toHaveLength(1);
    const l = launches[0]!;
    expect(l.entry).toBe('fk_softmax_smem');
    expect(l.options).toEqual(expect.arrayContaining(['-DFK_T=__nv_bfloat16', '-DFK_VEC=8', '-DFK_CS=8', '-DFK_LOG=1']));
    expect(l.options.some((o) => o.startsWith('-DFK_OT='))).toBe(false);
    expect([l.grid, l.block, l.shared]).toEqual([2048, 256, 2004 * 16 + (2 * 8 + 2) * 4]);
    expect(l.args.slice(2)).toEqual([256, 128256, 128256]);
    expect(lastSoftmaxLaunch?.kernel).toBe('fk_softmax_smem');
  });

  it('softmax bf16 -> f32 over long rows: FK_OT=float, the input still read in 16-byte vectors', () => {
    const { backend, ctx, launches } = hopper();
    const x = Tensor.empty(backend, [256, 128256], 'bf16');
    expect(softmax(ctx, x, -1, { outDType: 'f32' }).dtype).toBe('f32');
    expect(launches[0]!.entry).toBe('fk_softmax_smem');
    expect(launches[0]!.options).toEqual(expect.arrayContaining(['-DFK_OT=float', '-DFK_VEC=8']));
    expect(launches[0]!.options).not.toContain('-DFK_LOG=1');
  });

  it('softmax in the input dtype keeps the defines of before (no FK_OT / FK_LOG: the same kernels and cache keys)', () => {
    const { backend, ctx, launches } = hopper();
    softmax(ctx, Tensor.empty(backend, [1024, 4096], 'bf16'), -1);
    expect(launches[0]!.entry).toBe('fk_softmax');
    expect(launches[0]!.options).toEqual(['-DFK_T=__nv_bfloat16', '-DFK_VEC=8', '-DFK_NPT=4']);
    expect(launches[0]!.shared).toBe(0);
  });

  it('an odd row length: scalar vectors; the slice in elements', () => {
    const { backend, ctx, launches } = hopper();
    softmax(ctx, Tensor.empty(backend, [300, 131071], 'f16'), -1, { log: true });
    expect(launches[0]).toMatchObject({ entry: 'fk_softmax_smem', grid: 2400, shared: 16384 * 2 + (2 * 32 + 2) * 4 });
    expect(launches[0]!.options).toContain('-DFK_VEC=1');
  });

  it('row-strided input views read in place: 16-byte vectors where the view is aligned, scalars where not', () => {
    const { backend, ctx, launches } = hopper();
    const wide = Tensor.empty(backend, [256, 128264], 'bf16');
    softmax(ctx, wide.narrow(1, 8, 128256), -1, { outDType: 'f32' }); // 16 bytes in: aligned; the f32 output is fresh
    expect(launches[0]!.options).toContain('-DFK_VEC=8');
    expect(launches[0]!.args.slice(2)).toEqual([256, 128256, 128264]);
    softmax(ctx, wide.narrow(1, 1, 128256), -1, { log: true });
    expect(launches[1]!.options).toContain('-DFK_VEC=1');
    expect(launches[1]).toMatchObject({ entry: 'fk_softmax_smem', shared: 16032 * 2 + (2 * 32 + 2) * 4 });
  });

  it('below sm_90 (the fake device as it is): no cluster of shared-memory slices', () => {
    const { backend, ctx, launches } = fakeDevice();
    softmax(ctx, Tensor.empty(backend, [256, 128256], 'bf16'), -1, { log: true });
    expect(launches[0]!.entry).toBe('fk_softmax');
    expect(launches[0]!.options).toContain('-DFK_LOG=1');
  });

  it('another dim: made last (a copy), the kernel, the result copied back', () => {
    const { backend, ctx, launches } = hopper();
    const y = softmax(ctx, Tensor.empty(backend, [16, 40], 'f32'), 0, { log: true, outDType: 'bf16' });
    expect([y.shape, y.dtype]).toEqual([[16, 40], 'bf16']);
    expect(launches[0]!.options).toEqual(expect.arrayContaining(['-DFK_T=float', '-DFK_OT=__nv_bfloat16', '-DFK_LOG=1']));
  });
});

describe('registry softmax / log_softmax route (fake sm_90 device)', () => {
  function device() {
    const f = hopper();
    const table = new OpKernelTable('fake');
    Object.assign(f.backend, { opKernels: table });
    Object.assign(f.backend.ops, { spine: f.ctx });
    const runtime = (() => f.ctx.runtime) as unknown as () => CudaRuntime;
    const cache = new GenKernelCache();
    const g = registerGeneratedKernels(table, runtime, cache);
    return { ...f, g };
  }

  it('log_softmax and softmax to another float dtype take softmax.cu; the route is recorded', () => {
    const { backend, launches, g } = device();
    const x = Tensor.empty(backend, [256, 128256], 'bf16');
    expect(callOp1('log_softmax', [x], { dim: -1 }).dtype).toBe('bf16');
    expect(launches.at(-1)!.entry).toBe('fk_softmax_smem');
    expect(g.softmaxPath).toBe('fk_softmax_smem');
    expect(callOp1('softmax', [x], { dim: -1, dtype: 'f32' }).dtype).toBe('f32');
    expect(launches.at(-1)!.options).toContain('-DFK_OT=float');
    callOp1('softmax', [Tensor.empty(backend, [64, 512], 'f16')], { dim: -1 });
    expect(g.softmaxPath).toBe('fk_softmax');
  });
});
