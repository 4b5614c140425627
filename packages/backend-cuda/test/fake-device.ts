/**
 * A fake CUDA device for the CPU tests of the spine ops' host side: tensors get distinct device addresses (no memory),
 * every kernel launch is recorded (entry, compile options, grid, block, shared bytes, arguments, the arguments packed
 * as the runtime would pack them) and counted as a launch of the runtime, as copies and fills are, which is what
 * SpineContext's "what did the kernel just before write" checks read.
 */
import { type Backend, type Storage } from '@fastkernels/core';
import { expect } from 'vitest';
import { layoutArgs, parseSignature, writeArgs } from '../src/args.js';
import type { CudaKernelSpec } from '../src/kernel.js';
import { SpineContext } from '../src/ops/launch/context.js';

export interface FakeLaunch {
  entry: string;
  options: readonly string[];
  grid: unknown;
  block: unknown;
  shared: number;
  args: readonly unknown[];
}

export function fakeDevice(): { backend: Backend; ctx: SpineContext; launches: FakeLaunch[] } {
  let next = 1 << 20;
  const launches: FakeLaunch[] = [];
  const runtime = { properties: () => ({ major: 8, multiprocessors: 132 }), launches: 0 };
  const backend = {
    name: 'fake',
    allocate(bytes: number, device: number): Storage {
      const devicePtr = next;
      next += Math.ceil(Math.max(bytes, 1) / 256) * 256;
      let refs = 1;
      return { backend, device, byteLength: bytes, devicePtr, retain: () => void refs++, release: () => void refs--, get released() { return refs <= 0; } };
    },
    ops: {
      copy: () => void runtime.launches++,
      fill: () => void runtime.launches++,
    },
  } as unknown as Backend;
  const ctx = {
    multiprocessors: 132,
    // an sm_80 device: no programmatic dependent launches (the tuning's launch.pdl is on by default), plain kernel options
    runtime,
    kvWrite: null,
    noteKvWrite: SpineContext.prototype.noteKvWrite,
    followsKvWrite: SpineContext.prototype.followsKvWrite,
    kernel(spec: CudaKernelSpec) {
      const sig = parseSignature(spec.source, spec.entry);
      const layout = layoutArgs(sig);
      return {
        launch(grid: unknown, block: unknown, shared: number, args: readonly unknown[]) {
          expect(args.length).toBe(sig.length);
          const buf = new ArrayBuffer(layout.size + 8);
          writeArgs(new DataView(buf), new Uint8Array(buf), layout, args as never);
          launches.push({ entry: spec.entry, options: spec.options ?? [], grid, block, shared, args });
          runtime.launches++;
        },
      };
    },
  } as unknown as SpineContext;
  return { backend, ctx, launches };
}
