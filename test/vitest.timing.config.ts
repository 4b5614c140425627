import { defineConfig } from 'vitest/config';
import { sharedResolve, sharedTest } from '../vitest.shared.js';

// The tests whose assertions are timing statistics (the self-test's speedup of the baselines against themselves):
// they run after every other project has finished (groupOrder 1), so the other test files' load on a shared CPU does
// not drift between the interleaved calls they compare.
export default defineConfig({
  ...sharedResolve,
  test: { ...sharedTest, name: 'e2e-timing', include: ['isolation.test.ts'], testTimeout: 180_000, fileParallelism: false, sequence: { groupOrder: 1 } },
});
