// Types of tools/gpu-tests.mjs (test/gpu-host-tests.test.ts imports it).
export function bundleGpuTests(outDir?: string): Promise<string[]>;
export function vitestClosure(): string[];
