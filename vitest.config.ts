import { defineConfig } from 'vitest/config';
import { gpuTag, hasGpu, sharedResolve } from './vitest.shared.js';
import { SummaryReporter } from './tools/summary-reporter.js';

if (!hasGpu) console.log('[fastkernels] no GPU here: tests tagged `gpu` are skipped (set FASTKERNELS_GPU=1 to force them)');

export default defineConfig({
  ...sharedResolve,
  test: {
    tags: [gpuTag],
    reporters: ['default', new SummaryReporter()],
    projects: ['packages/*', 'test', 'test/vitest.timing.config.ts'],
  },
});
