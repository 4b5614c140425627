import { defineConfig } from 'vitest/config';
import { sharedResolve, sharedTest } from '../../vitest.shared.js';

// isolate: false reuses the module graph (core, zod, tsyringe) across this package's test files, whose
// cost is mostly imports; the tests share no mutable state beyond the backend's live-memory counters.
export default defineConfig({ ...sharedResolve, test: { ...sharedTest, name: 'backend-cpu', isolate: false } });
