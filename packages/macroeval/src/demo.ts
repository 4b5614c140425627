import { BENCH_REPORT_VERSION, Rng, summarizeResults, type BenchReport, type CaseResult } from '@fastkernels/core';
import type { E2eModelRecordInput, E2eReportInput } from './e2e-record.js';

/**
 * Deterministic demo inputs for the board (packages/macroeval/fixtures/): two made-up agents, the
 * default-set universe of 11 models in 8 families, kernel bench reports in core's format for the
 * independent, composed and sequential sets, and e2e reports for three entries. Made-up numbers shaped
 * like the published ones (large kernel wins, small end-to-end gains, some crashes and drops).
 */
export const DEMO_UNIVERSE: ReadonlyArray<{ id: string; label: string; family: string }> = [
  { id: 'meta-llama/Llama-3.1-8B-Instruct', label: 'Llama-3.1-8B', family: 'llm' },
  { id: 'openai/gpt-oss-120b', label: 'GPT-OSS-120B', family: 'llm' },
  { id: 'Qwen/Qwen3-Next-80B-A3B-Instruct', label: 'Qwen3-Next-80B', family: 'linear_attn' },
  { id: 'moonshotai/Kimi-Linear-48B-A3B-Instruct', label: 'Kimi-Linear-48B', family: 'linear_attn' },
  { id: 'fla-hub/gla-2.7B-100B', label: 'GLA-2.7B', family: 'linear_attn' },
  { id: 'black-forest-labs/FLUX.1-dev', label: 'FLUX.1-dev', family: 'vision' },
  { id: 'Qwen/Qwen3-VL-235B-A22B-Instruct-FP8', label: 'Qwen3-VL-235B', family: 'multimodal' },
  { id: 'jameslahm/yolov10n', label: 'YOLOv10n', family: 'edge' },
  { id: 'OpenFold/OpenFold3', label: 'OpenFold3', family: '3d_robotics' },
  { id: 'BAAI/bge-m3', label: 'BGE-M3', family: 'recsys' },
  { id: 'Etched/oasis-500m', label: 'Oasis-500M', family: 'world_models' },
];

const STEMS: Record<number, string[]> = {
  1: ['rms_norm', 'silu_and_mul', 'rotary_emb', 'linear', 'gelu', 'softmax', 'layer_norm', 'topk_softmax', 'moe_sum', 'flash_attn_prefill', 'embedding', 'l2_norm'],
  2: ['attention', 'llama_mlp', 'qwen3_moe', 'flux_attention', 'gla_attention', 'vision_patch_embed', 'yolov10_c2f', 'timestep_embedding'],
  3: ['llama_decoder', 'flux_transformer_block', 'gla_decoder', 'yolov10_backbone'],
};

interface AgentStyle {
  readonly name: string;
  readonly seed: number;
  /** log-mean of the kernel speedup per level, and the chance a kernel is wrong. */
  readonly mu: Record<number, number>;
  readonly pWrong: number;
}

const ATLAS: AgentStyle = { name: 'Atlas', seed: 11, mu: { 1: 0.45, 2: 0.9, 3: 1.2 }, pWrong: 0.08 };
const BOREALIS: AgentStyle = { name: 'Borealis', seed: 29, mu: { 1: 0.55, 2: 1.1, 3: 1.5 }, pWrong: 0.05 };

const r4 = (x: number) => Math.round(x * 1e4) / 1e4;

function benchCases(style: AgentStyle, mode: 'ind' | 'comp' | 'seq'): CaseResult[] {
  const rng = new Rng(style.seed);
  const modeRng = new Rng(style.seed * 7 + mode.length);
  const out: CaseResult[] = [];
  for (const level of [1, 2, 3]) {
    for (const stem of STEMS[level]!) {
      // The op's own quality is shared by the modes; composition perturbs it.
      const base = style.mu[level]! + 0.35 * rng.normal();
      const wrongInd = rng.uniform() < style.pWrong;
      const composedBreaks = level > 1 && rng.uniform() < (mode === 'ind' ? 0 : 0.15);
      const shift = mode === 'ind' || level === 1 ? 0 : 0.12 * modeRng.normal() + (mode === 'seq' ? 0.05 : 0);
      const cases = level === 1 ? 3 : 2;
      for (let c = 0; c < cases; c++) {
        const wrong = wrongInd || composedBreaks;
        const speedup = r4(Math.exp(base + shift + 0.1 * rng.normal()));
        const baselineMs = r4(0.05 * (level * 4) * (1 + c));
        out.push({
          task: `L${level}/${stem}`, level, case: `c${c}`, dtype: 'bf16', status: wrong ? 'INCORRECT_NUMERICAL' : 'PASSED',
          maxAbsError: wrong ? 0.5 : 0.004, maxRelError: wrong ? 0.9 : 0.006, matchedRatio: wrong ? 0.62 : 1,
          baselineMs, candidateMs: r4(baselineMs / speedup), speedup, ciLow: r4(speedup * 0.97), ciHigh: r4(speedup * 1.03), rounds: 3, iters: 50,
          ...(wrong ? { detail: '38% of elements outside atol=0.01, rtol=0.01' } : {}),
        });
      }
    }
  }
  return out;
}

export function demoBenchReport(agent: 'Atlas' | 'Borealis', mode: 'ind' | 'comp' | 'seq'): BenchReport {
  const style = agent === 'Atlas' ? ATLAS : BOREALIS;
  const results = benchCases(style, mode);
  return {
    version: BENCH_REPORT_VERSION,
    createdAt: '2026-11-20T10:00:00.000Z',
    complete: true,
    candidates: `runs/${agent.toLowerCase()}-${mode}`,
    backend: 'cuda',
    device: { index: 0, name: 'synthetic demo data (not a measurement)', totalMemory: 150_754_820_096, multiprocessors: 132, computeCapability: '9.0' },
    versions: { fastkernels: '0.1.0', node: 'v20.20.2', cuda: '13.0' },
    options: { rounds: 3, iters: 50, warmup: 10, seed: 0, shapes: 'production' },
    results,
    summary: JSON.parse(JSON.stringify(summarizeResults(results))) as BenchReport['summary'],
  };
}

interface E2eStyle {
  readonly seed: number;
  /** log-mean of thr and lat speedups. */
  readonly thr: number;
  readonly lat: number;
  readonly crash: readonly string[];
  readonly drift: readonly string[];
  readonly dropRate: number;
}

const E2E_STYLES: Record<string, E2eStyle> = {
  'Atlas/ind': { seed: 5, thr: 0.05, lat: 0.1, crash: ['jameslahm/yolov10n'], drift: ['Qwen/Qwen3-VL-235B-A22B-Instruct-FP8'], dropRate: 0.25 },
  'Atlas/seq': { seed: 6, thr: 0.07, lat: 0.12, crash: [], drift: ['Etched/oasis-500m', 'Qwen/Qwen3-Next-80B-A3B-Instruct'], dropRate: 0.35 },
  'Borealis/ind': { seed: 7, thr: 0.1, lat: 0.2, crash: ['OpenFold/OpenFold3', 'fla-hub/gla-2.7B-100B'], drift: ['black-forest-labs/FLUX.1-dev'], dropRate: 0.4 },
};

const CATEGORIES = ['compile', 'runtime', 'runtime', 'incorrect', 'import', 'timeout'] as const;

export function demoE2eReport(agent: 'Atlas' | 'Borealis', mode: 'ind' | 'seq'): E2eReportInput {
  const style = E2E_STYLES[`${agent}/${mode}`]!;
  const rng = new Rng(style.seed);
  const winners = demoBenchReport(agent, mode).summary.tasks.filter((t) => t.correct && (t.speedup ?? 0) >= 1).map((t) => t.task);
  const models = DEMO_UNIVERSE.map((m): E2eModelRecordInput => {
    const noise = Array.from({ length: 24 }, () => r4(Math.abs(0.004 * rng.normal())));
    const requested = winners.filter(() => rng.uniform() < 0.45);
    const drops = requested
      .filter(() => rng.uniform() < style.dropRate)
      .map((task) => ({ task, category: CATEGORIES[rng.int(0, CATEGORIES.length)]! }));
    const crashed = style.crash.includes(m.id);
    const drift = style.drift.includes(m.id) ? 0.12 : 0;
    const discrepancies = Array.from({ length: 24 }, () => r4(Math.max(0, drift + Math.abs(0.006 * rng.normal()) + (rng.uniform() < 0.04 ? 0.3 : 0))));
    const thr = r4(Math.exp(style.thr + 0.06 * rng.normal()));
    const lat = r4(Math.exp(style.lat + 0.1 * rng.normal()));
    const asIsFails = drops.length > 0;
    const base = { model: m.id, label: m.label, family: m.family, noiseDiscrepancies: noise, requested, drops };
    if (crashed) {
      return { ...base, outcome: 'incomplete', detail: 'no deployable subset: runtime error in every retry', asIs: { outcome: 'crash', detail: 'runtime' } };
    }
    return {
      ...base,
      outcome: 'ok',
      throughputSpeedup: thr,
      latencySpeedup: lat,
      discrepancies,
      ...(asIsFails ? { asIs: { outcome: rng.uniform() < 0.5 ? 'crash' : 'broken', detail: drops[0]!.category } } : {}),
    };
  });
  return { schema_version: 1, agent, mode, open_weights: agent === 'Borealis', gpu: 'synthetic demo data (not a measurement)', gpu_count: 1, versions: { fastkernels: '0.1.0' }, models };
}

/** File name → content for packages/macroeval/fixtures/. */
export function demoFixtures(): Record<string, unknown> {
  return {
    'kernel-atlas-ind.json': demoBenchReport('Atlas', 'ind'),
    'kernel-atlas-comp.json': demoBenchReport('Atlas', 'comp'),
    'kernel-atlas-seq.json': demoBenchReport('Atlas', 'seq'),
    'kernel-borealis-ind.json': demoBenchReport('Borealis', 'ind'),
    'e2e-atlas-ind.json': demoE2eReport('Atlas', 'ind'),
    'e2e-atlas-seq.json': demoE2eReport('Atlas', 'seq'),
    'e2e-borealis-ind.json': demoE2eReport('Borealis', 'ind'),
  };
}

/** The demo inputs for `fastkernels score`, by file name. */
export const DEMO_KERNEL_FILES = ['kernel-atlas-ind.json', 'kernel-atlas-comp.json', 'kernel-atlas-seq.json', 'kernel-borealis-ind.json'] as const;
export const DEMO_E2E_FILES = ['e2e-atlas-ind.json', 'e2e-atlas-seq.json', 'e2e-borealis-ind.json'] as const;
