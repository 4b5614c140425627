/**
 * CompileBeforeCapture (grouped-gemm.ts): a kernel queued by an eager call that declined is compiled by the capture hook
 * of its runtime, once, before the capture starts; another runtime's capture leaves it queued. No GPU: a fake runtime and
 * kernel.
 */
import { describe, expect, it } from 'vitest';
import type { CudaKernel } from '../../kernel.js';
import { captureHooks, type CudaRuntime } from '../../runtime.js';
import { CompileBeforeCapture } from './grouped-gemm.js';

describe('CompileBeforeCapture', () => {
  it('compiles what was queued when its runtime starts a capture, once', () => {
    const rt = {} as CudaRuntime;
    const other = {} as CudaRuntime;
    const before = captureHooks.length;
    const q = new CompileBeforeCapture(() => rt);
    expect(captureHooks.length).toBe(before + 1);
    const hook = captureHooks[captureHooks.length - 1]!;
    let compiled = 0;
    const kernel = { compile: () => (compiled++, kernel) } as unknown as CudaKernel;
    q.add('v1', () => kernel);
    q.add('v1', () => kernel); // the same variant twice: one compile
    hook(other);
    expect(compiled).toBe(0);
    hook(rt);
    expect(compiled).toBe(1);
    hook(rt);
    expect(compiled).toBe(1);
    captureHooks.splice(captureHooks.indexOf(hook), 1);
  });
});
