// Types of bench/suites/embed/merge.mjs.
export function readSide(file: string | undefined): Record<string, unknown> | null;
