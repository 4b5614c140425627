import { Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cudaKernel } from './kernel.js';
import { KERNEL_SOURCES } from './kernel-sources.generated.js';
import { gpu, randomValues, upload } from './gpu-test-util.js';

const G = { tags: ['gpu'] };

describe('CUDA graphs', () => {
  it('capture + replay equals eager (ops allocating from the graph pool, cuBLASLt, a custom kernel)', G, () => {
    const b = gpu();
    const rt = b.runtime;
    const x = upload(randomValues(64 * 32, 1, 'bf16'), [64, 32], 'bf16');
    const w = upload(randomValues(32 * 48, 2, 'bf16'), [32, 48], 'bf16');
    const bias = upload(randomValues(48, 3, 'bf16'), [48], 'bf16');
    const step = () => b.ops.mul(b.ops.add(b.ops.matmul(x, w), bias), bias);
    const eager = step();
    const want = eager.toFloat64Array();
    let out: Tensor | undefined;
    const g = rt.capture(() => {
      out = step();
    }, { poolBytes: 16 << 20 });
    expect(g.nodeCount).toBeGreaterThan(2);
    out!.fill_(0); // eager work between capture and replay
    g.replay();
    expect(out!.toFloat64Array()).toEqual(want);
    g.destroy();
  });

  it('replays many times, and recapture updates the executable graph in place', G, () => {
    const b = gpu();
    const rt = b.runtime;
    const inc = cudaKernel({ source: KERNEL_SOURCES['runtime.cu']!, entry: 'fk_increment' });
    const t = Tensor.zeros(b, [1000], 'f32');
    inc.compile();
    const g = rt.capture(() => {
      for (let i = 0; i < 10; i++) inc.launch(4, 256, 0, [t, 1000]);
    });
    for (let r = 0; r < 50; r++) g.replay();
    expect(Array.from(t.toFloat64Array()).every((v) => v === 500)).toBe(true);
    const u = Tensor.zeros(b, [1000], 'f32');
    expect(g.recapture(() => {
      for (let i = 0; i < 10; i++) inc.launch(4, 256, 0, [u, 500]);
    })).toBe('updated');
    g.replay();
    const got = u.toFloat64Array();
    expect(got[0]).toBe(10);
    expect(got[600]).toBe(0);
    g.destroy();
  });

  it('refuses a host sync and a fresh allocation inside capture, with clear errors; the stream stays usable', G, () => {
    const b = gpu();
    const rt = b.runtime;
    const t = Tensor.zeros(b, [16], 'f32');
    expect(() => rt.capture(() => t.toFloat64Array())).toThrow(/not allowed during CUDA graph capture/);
    expect(() => rt.capture(() => Tensor.empty(b, [16], 'f32'))).toThrow(/during CUDA graph capture, outside a graph pool/);
    expect(() => rt.capture(() => b.synchronize())).toThrow(/not allowed during CUDA graph capture/);
    expect(rt.capturing).toBe(false);
    t.fill_(2);
    expect(t.toFloat64Array()[3]).toBe(2);
  });
});
