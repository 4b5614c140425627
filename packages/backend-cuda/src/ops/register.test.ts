import { OpKernelTable, listOps } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { CudaBackend } from '../backend.js';
import { GENERATED_ELEMENTWISE_OPS } from './elementwise-kernels.js';
import { registerGeneratedKernels } from './register.js';

describe('registry kernels of the generated ops', () => {
  it('the CUDA backend registers every elementwise op, the chain, the reductions and softmaxes without touching CUDA', () => {
    const b = new CudaBackend();
    const names = b.opKernels.names();
    for (const op of [...GENERATED_ELEMENTWISE_OPS, 'elementwise_chain', 'sum', 'mean', 'amax', 'amin', 'softmax', 'log_softmax']) expect(names).toContain(op);
    expect(b.generatedOps.cache.size).toBe(0);
  });

  it('every elementwise op core declares has a generated kernel, or an Ops route to a hand-written one', () => {
    const table = new OpKernelTable('t');
    registerGeneratedKernels(table, () => {
      throw new Error('no runtime in a CPU test');
    });
    const missing = listOps('elementwise').filter((s) => !table.has(s.name) && !s.viaOps).map((s) => s.name);
    expect(missing).toEqual([]);
  });
});
