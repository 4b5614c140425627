// Types of bench/suites/vision/merge.mjs.
export function readJsonOrNull(file: string): unknown;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function mergeWork(work: string, commit?: string): Record<string, any>;
