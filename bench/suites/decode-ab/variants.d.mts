// Types of bench/suites/decode-ab/variants.mjs (plain ESM run by the bundle's node; test/bench-suites.test.ts imports it).
export interface Variant {
  note: string;
  settings: Readonly<Record<string, string>>;
}
export const VARIANTS: Readonly<Record<string, Variant>>;
export class SettingError extends Error {}
export function envFor(setting: string): string[];
