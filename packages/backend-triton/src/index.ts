import { definePlugin } from '@fastkernels/core';

/**
 * Triton backend (issue 9): compiles Triton kernels through the host's Python and launches
 * them through backend-cuda's runtime. Until then the plugin registers nothing, so the CLI
 * reports Triton as unavailable rather than pretending to support it.
 */
export const tritonPlugin = definePlugin({ name: 'backend-triton', version: '0.1.0', register: () => {} });
export const TRITON_STATUS = { available: false, reason: 'backend-triton is not implemented yet (issue 9)' } as const;
