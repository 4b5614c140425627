import { BACKEND, definePlugin } from '@fastkernels/core';
import { CudaBackend } from './backend.js';

/** Registers one CudaBackend under the multi-bound BACKEND token (construction is lazy: no driver calls). */
export const cudaPlugin = definePlugin({
  name: 'backend-cuda',
  version: '0.2.0',
  register: (c) => c.register(BACKEND, { useValue: new CudaBackend() }),
});
