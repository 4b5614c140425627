// The vitest config of the GPU host's test run (dist/gpu-host/gpu-tests/vitest.config.mjs; tools/gpu-tests.mjs copies
// it there). The tests are esbuild bundles: vitest only collects and runs them. Same `gpu` tag as the repo's config
// (vitest.shared.ts): skipped, with the reason, where no NVIDIA driver is present. Plain ESM (no vite plugins, no TS).
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GpuTestsReporter, hasGpu, NO_GPU } from './reporter.mjs'; // tools/gpu-tests-reporter.mjs

export default {
  test: {
    root: dirname(fileURLToPath(import.meta.url)),
    include: ['*.test.mjs'],
    tags: [{ name: 'gpu', description: hasGpu ? 'needs an NVIDIA GPU and libcuda.so.1' : NO_GPU, skip: !hasGpu }],
    // one file at a time, each in its own process: GPU tests share one device, and a sticky CUDA error (an illegal
    // address) kills its process's context; the next file starts clean
    pool: 'forks',
    fileParallelism: false,
    isolate: true,
    // the GPU tests set their own limits where they matter; the rest (model loads, NVRTC builds) may be slow
    testTimeout: 600_000,
    hookTimeout: 600_000,
    reporters: [new GpuTestsReporter()],
    watch: false,
  },
  cacheDir: existsSync('/tmp') ? '/tmp/fastkernels-vitest-cache' : undefined,
};
