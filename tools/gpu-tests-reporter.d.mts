// Types of tools/gpu-tests-reporter.mjs (plain ESM loaded by vitest on the GPU host; test/gpu-host-tests.test.ts imports it).
export const hasGpu: boolean;
export const NO_GPU: string;
interface CaseLike {
  module: { relativeModuleId: string };
  fullName: string;
  tags?: string[];
  options?: { mode?: string };
  result(): { state: string; errors?: unknown[]; note?: string };
  diagnostic(): { duration: number } | undefined;
}
interface ModuleLike {
  relativeModuleId: string;
  errors(): unknown[];
  children: { allTests(): Iterable<{ result(): { state: string } }> };
}
export class GpuTestsReporter {
  totals: { passed: number; failed: number; skipped: number };
  onTestCaseResult(test: CaseLike): void;
  onTestModuleEnd(module: ModuleLike): void;
  onTestRunEnd(modules: readonly unknown[], unhandledErrors: readonly unknown[]): void;
}
