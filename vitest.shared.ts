import { existsSync } from 'node:fs';
import { defaultServerConditions } from 'vite';
import { SummaryReporter } from './tools/summary-reporter.js';

/** Tests resolve sibling packages to their TypeScript sources (no build needed, nothing stale). */
const conditions = ['@fastkernels/source', ...defaultServerConditions];
export const sharedResolve = { resolve: { conditions }, ssr: { resolve: { conditions } } };

/** GPU tests carry the `gpu` tag; they skip, with that reason, where no NVIDIA driver is present. */
export const hasGpu = process.env.FASTKERNELS_GPU ? process.env.FASTKERNELS_GPU === '1' : existsSync('/dev/nvidiactl');

export const gpuTag = {
  name: 'gpu',
  description: hasGpu ? 'needs an NVIDIA GPU and libcuda.so.1' : 'SKIPPED: no NVIDIA GPU on this machine (/dev/nvidiactl absent; FASTKERNELS_GPU=1 forces)',
  skip: !hasGpu,
};

export const sharedTest = {
  tags: [gpuTag],
  reporters: ['default', new SummaryReporter()],
  testTimeout: 60_000,
};
