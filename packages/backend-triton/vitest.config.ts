import { defineConfig } from 'vitest/config';
import { sharedResolve, sharedTest } from '../../vitest.shared.js';

export default defineConfig({ ...sharedResolve, test: { ...sharedTest, name: 'backend-triton' } });
