import { defineConfig } from 'vitest/config';
import { sharedResolve, sharedTest } from '../vitest.shared.js';

// End-to-end tests run the built CLI as a user would; they are slower, so one fork at a time.
// isolation.test.ts (timing statistics) runs alone afterwards: vitest.timing.config.ts.
export default defineConfig({ ...sharedResolve, test: { ...sharedTest, name: 'e2e', testTimeout: 180_000, fileParallelism: false, exclude: ['**/node_modules/**', 'isolation.test.ts'] } });
