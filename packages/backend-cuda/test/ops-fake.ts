/**
 * A fake CUDA device for the CPU tests of the generated ops' host side (src/ops/host-path.test.ts,
 * registry-path.test.ts): tensors get distinct device addresses (no memory), and a kernel cache records each launch and
 * packs its arguments as the runtime would (a wrong count or type throws).
 */
import { OpKernelTable, Tensor, type Backend, type Storage } from '@fastkernels/core';
import { expect } from 'vitest';
import { layoutArgs, writeArgs, type ArgValue } from '../src/args.js';
import type { CudaKernel } from '../src/kernel.js';
import type { GeneratedKernel } from '../src/ops/elementwise-source.js';
import { GenKernelCache } from '../src/ops/gen-cache.js';
import { registerGeneratedKernels } from '../src/ops/register.js';
import type { CudaRuntime } from '../src/runtime.js';

export interface Launch {
  entry: string;
  source: string;
  grid: unknown;
  block: unknown;
  args: ArgValue[];
}

export class RecordingCache extends GenKernelCache {
  readonly launches: Launch[] = [];
  readonly generated = new Set<string>();
  override kernel(key: string, generate: () => GeneratedKernel): CudaKernel {
    this.generated.add(key);
    const g = generate();
    const layout = layoutArgs(g.signature);
    const launch = (grid: unknown, block: unknown, _shared: number, args: readonly ArgValue[]) => {
      expect(args.length, `${g.entry}: argument count`).toBe(g.signature.length);
      const buf = new ArrayBuffer(layout.size + 8);
      writeArgs(new DataView(buf), new Uint8Array(buf), layout, args); // throws on a type mismatch
      this.launches.push({ entry: g.entry, source: g.source, grid, block, args: args.map((a) => (a instanceof Uint8Array ? a.slice() : a)) });
    };
    return { launch } as unknown as CudaKernel;
  }
}

export function fake() {
  let next = 1 << 20;
  const copies: [Tensor, Tensor][] = [];
  const backend = {
    name: 'fake',
    opKernels: new OpKernelTable('fake'),
    allocate(bytes: number, device: number): Storage {
      const devicePtr = next;
      next += Math.ceil(Math.max(bytes, 1) / 256) * 256;
      return { backend, device, byteLength: bytes, devicePtr, retain: () => {}, release: () => {} } as unknown as Storage;
    },
    ops: { copy: (d: Tensor, s: Tensor) => copies.push([d, s]), fill: () => {} },
  } as unknown as Backend;
  const runtime = (() => ({ properties: () => ({ multiprocessors: 132 }) })) as unknown as () => CudaRuntime;
  const cache = new RecordingCache();
  return { backend, runtime, cache, copies, t: (shape: number[], dtype: Tensor['dtype'] = 'bf16') => Tensor.empty(backend, shape, dtype) };
}

/**
 * fake() with the generated kernels registered in its op table; `without` names an op whose kernel is left out, so the
 * registry runs that op's decomposition on the same device (what a launch count is compared against).
 */
export function fakeRegistered(without?: string) {
  const f = fake();
  registerGeneratedKernels(f.backend.opKernels!, f.runtime, f.cache);
  if (without !== undefined) {
    const table = new OpKernelTable('fake');
    for (const name of f.backend.opKernels!.names()) {
      const e = f.backend.opKernels!.get(name)!;
      if (name !== without) table.register(name, e.kernel, e.supports);
    }
    (f.backend as { opKernels: OpKernelTable }).opKernels = table;
  }
  return f;
}
