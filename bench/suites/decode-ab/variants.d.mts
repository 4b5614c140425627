// Types of bench/suites/decode-ab/variants.mjs (plain ESM run by the bundle's node; test/bench-suites.test.ts imports it).
export type TuningOverride = Readonly<Record<string, Readonly<Record<string, boolean | number | string>>>>;
export interface Variant {
  note: string;
  tuning: TuningOverride;
}
export const VARIANTS: Readonly<Record<string, Variant>>;
export class SettingError extends Error {}
export function settingFor(setting: string): { tuning: TuningOverride; env: Record<string, string> };
export function envFor(setting: string, file: string): string[];
