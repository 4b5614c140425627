/** Entry of a GPU-test rank under vitest (the bundled GPU tests run their own bundle instead). */
import { runGpuScenario } from './gpu-scenarios.js';

await runGpuScenario();
