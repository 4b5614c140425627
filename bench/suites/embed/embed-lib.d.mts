// Types of bench/suites/embed/embed-lib.mjs (plain ESM run by the bundle's node; test/bench-embed.test.ts imports it).
export class EmbedArgError extends Error {}
export const BGE_M3_MAX_LEN: number;
export interface EmbedArgs {
  model: string;
  json: string | null;
  workload: string | null;
  quick: boolean;
  n: number;
  minLen: number;
  maxLen: number;
  seed: number;
  maxNumBatchedTokens: number;
  pooling: string;
  repeats: number;
  warmup: number;
}
export function parseEmbedArgs(argv: readonly string[]): EmbedArgs;
export function makeWorkload(w: { n: number; minLen: number; maxLen: number; seed: number }, vocab?: number): number[][];
export function workloadJsonl(docs: readonly (readonly number[])[]): string;
export interface EmbedTarget {
  key: string;
  label: string;
  target: number;
}
export const TARGETS: readonly EmbedTarget[];
export const SERVE_CLIENTS: number;
export interface EmbedSummary {
  docs: number | null;
  tokens: number | null;
  oursSeqS: number | null;
  oursTokS: number | null;
  hfSdpaTokS: number | null;
  hfCompileTokS: number | null;
  oursOverHfSdpa: number | null;
  oursOverHfCompile: number | null;
  serveTokS: number | null;
  serveReqS: number | null;
  serveOverOffline: number | null;
}
export interface EmbedMerged {
  commit: string | null;
  device: string | null;
  model: string;
  workload: Record<string, unknown> | null;
  summary: EmbedSummary;
  targets: (EmbedTarget & { value: number | null; met: boolean | null })[];
  ours: Record<string, unknown> | null;
  hf: Record<string, unknown> | null;
  serve: Record<string, unknown> | null;
}
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function mergeEmbed(ours: any, hf: any, opts?: { commit?: string; serve?: any }): EmbedMerged;
export function formatEmbed(m: EmbedMerged): string[];
