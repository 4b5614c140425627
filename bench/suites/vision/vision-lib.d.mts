// Types of bench/suites/vision/vision-lib.mjs (plain ESM run by the bundle's node; test/bench-vision.test.ts imports it).
export interface VisionPlan {
  tiny: boolean;
  quick: boolean;
  models: string[];
  inputs: Record<string, Record<string, unknown>>;
  rows: { id: string; model: string; batch: number; dtype: string; compile: string[] }[];
  fluxLayers: [number, number];
  fluxFullDepth: boolean;
  timeBudgetS: number;
  minIters: number;
  maxIters: number;
  /** How both sides pick cuDNN's conv algorithms (absent in plans written before it was recorded). */
  convAlgoSearch?: 'benchmark' | 'heuristic';
}
export function convAlgoSearchOf(plan: Pick<VisionPlan, 'convAlgoSearch'>): string;
export function itersFor(plan: Pick<VisionPlan, 'timeBudgetS' | 'minIters' | 'maxIters'>, oneMs: number, budgetS?: number): number;
export interface VisionTarget {
  id: string;
  model: string;
  role: 'small' | 'big';
  metric: 'latency' | 'speedup' | 'floor';
  torch?: string;
  bound: number;
  label: string;
}
export const TARGETS: readonly VisionTarget[];
export const HEADLINE_KEYS: Readonly<Record<string, string>>;
export interface VisionMergeInput {
  plan: VisionPlan;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  ours?: Record<string, any>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  torch?: Record<string, any>;
  torchSkipped?: string | null;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  rateOurs?: any;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  rateTorch?: any;
  logs?: Record<string, string | null>;
  commit?: string;
}
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function mergeVision(input: VisionMergeInput): Record<string, any>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function formatVision(merged: Record<string, any>): string[];
