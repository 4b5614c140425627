// Types of bench/suites/decode-profile/decode-profile-lib.mjs (plain ESM run by the bundle's node; test/decode-profile.test.ts imports it).
export interface NcuKernel {
  id: number;
  name: string;
  us: number;
}
export interface KernelRow {
  name: string;
  gemm: boolean;
  countPerStep: number;
  usPerStep: number;
  usPerLaunch: number;
  shareOfKernels: number;
  shareOfStep: number | null;
  variants?: { name: string; countPerStep: number; usPerStep: number }[];
}
export interface GemmWeights {
  layers: number;
  itemsize: number;
  layerRoles: { role: string; k: number; n: number; bytes: number }[];
  lmHead: { role: string; k: number; n: number; bytes: number };
  perLayerBytes: number;
  totalBytes: number;
}
export interface GemmRole {
  role: string;
  shape: string;
  count: number;
  usPerStep: number;
  bytesPerStep: number;
  achievedGBs: number | null;
  kernels: string[];
}
export interface DecodeProfileAnalysis {
  error?: string;
  launches: number;
  kernelsPerStep?: number;
  stepsMatched?: number;
  stepsExpected?: number;
  kernelSumMs?: number;
  stepMs?: number | null;
  gapMs?: number | null;
  gapPerKernelUs?: number | null;
  graphReplayMs?: number | null;
  graphGapMs?: number | null;
  hostGapMs?: number | null;
  perKernel?: KernelRow[];
  gemmGBs?: number | null;
  gemm?: { usPerStep: number; launchesPerStep: number; weightBytes: number; achievedGBs: number | null; copyGBs: number; ofCopy: number | null; floorMs: number | null; roles: GemmRole[] | null };
}
export const GEMM_GROUP: string;
export const DEFAULT_COPY_GBS: number;
export function parseCsv(text: string): string[][];
export function ncuNumber(s: unknown): number;
export function parseNcuCsv(text: string, metric?: string): NcuKernel[];
export function findPeriod(names: readonly string[], steps: number, options?: { minReps?: number; maxK?: number }): { K: number; reps: number } | null;
export function shortName(name: string): string;
export function isGemmName(name: string): boolean;
export function kernelGroup(name: string): string;
export function aggregateSteps(kernels: readonly { name: string; us: number }[], K: number, reps: number, options?: { stepMs?: number | null }): { perKernel: KernelRow[]; kernelSumUs: number };
export function llamaGemmWeights(cfg: Record<string, unknown>, itemsize?: number): GemmWeights;
export function gemmRoles(stepKernels: readonly { name: string; us: number }[], weights: GemmWeights): GemmRole[] | null;
export function analyzeDecodeProfile(args: { kernels: readonly { name: string; us: number }[]; steps: number; stepMs?: number | null; graphReplayMs?: number | null; config?: Record<string, unknown> | null; copyGBs?: number }): DecodeProfileAnalysis;
export function formatTable(r: Record<string, any>): string;
