import { definePlugin } from '@fastkernels/core';

/**
 * NCCL backend (issue 10): collectives, a multi-process launcher and tensor-parallel layers.
 * Until then the plugin registers nothing.
 */
export const ncclPlugin = definePlugin({ name: 'backend-nccl', version: '0.1.0', register: () => {} });
export const NCCL_STATUS = { available: false, reason: 'backend-nccl is not implemented yet (issue 10)' } as const;
