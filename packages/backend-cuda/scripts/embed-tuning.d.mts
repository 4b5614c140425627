/** The types of embed-tuning.mjs, for its test (`npm run typecheck` checks the test files). */
export function renderTuningFiles(dir?: string): string;
