import { BACKEND, definePlugin } from '@fastkernels/core';
import { CpuBackend } from './backend.js';

/** Registers one CpuBackend under the multi-bound BACKEND token. */
export const cpuPlugin = definePlugin({
  name: 'backend-cpu',
  version: '0.2.0',
  register: (c) => c.register(BACKEND, { useValue: new CpuBackend() }),
});
