// Types of bench/lib/record.mjs (plain ESM run by the bundle's node; test/bench-suites.test.ts imports it).
export type Headline = Record<string, unknown>;
export const HEADLINES: Readonly<Record<string, (result: Record<string, any>) => Headline>>;
export function readResult(file: string): Record<string, any>;
export interface RecordOptions {
  suite: string;
  device: string;
  file: string;
  name?: string;
  out: string;
  commit?: string;
  exit?: number | string;
  args?: string;
  date?: string;
}
export function measuredNothing(headline: Headline): boolean;
export function record(options: RecordOptions): ({ date: string; commit: string | null; suite: string; file: string } & Headline) | null;
