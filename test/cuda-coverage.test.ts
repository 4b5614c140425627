/**
 * On the CPU: which registry ops the tiny gpt-oss / Qwen3-Next / Kimi-Linear models call on the way through greedy
 * generate (prefill, eager decode, captured decode) that the CUDA backend has no kernel and no route for, and which host
 * reads / writes happen inside a captured decode step (on CUDA those fail the capture). See cuda-coverage-backend.ts.
 * The lists it prints are the CUDA work left for issues 31 / 32; each model must have no gap and no transfer in a
 * capture. Then the engine GPU tests' own check (engine-cuda-parity.ts) runs with this backend standing in for CUDA:
 * its comparisons and graph-decode plumbing, on the CPU.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LLMEngine, baselineRegistry, loadModel, writeRandomModelCheckpoint } from '@fastkernels/model-zoo';
import { afterAll, describe, expect, it } from 'vitest';
import tinyGptOss from '../packages/model-zoo/fixtures/tiny-gpt-oss/config.json' with { type: 'json' };
import tinyQwen3Next from '../packages/model-zoo/fixtures/tiny-qwen3-next/config.json' with { type: 'json' };
import tinyKimiLinear from '../packages/model-zoo/fixtures/tiny-kimi-linear/config.json' with { type: 'json' };
import { CudaCoverageBackend, type CoverageReport } from './cuda-coverage-backend.js';
import { checkEngineParity } from './engine-cuda-parity.js';

const tmp = mkdtempSync(join(tmpdir(), 'fk-cuda-coverage-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function coverage(name: string, raw: Record<string, unknown>, dtype: 'f32' | 'bf16' = 'f32'): CoverageReport {
  const dir = join(tmp, `${name}-${dtype}`);
  writeRandomModelCheckpoint(dir, raw, { registry: baselineRegistry(), seed: 7, dtype });
  const backend = new CudaCoverageBackend();
  const m = loadModel(dir, { backend, registry: baselineRegistry(), dtype });
  const vocab = raw.vocab_size as number;
  const reqs = [1, 40, 5, 70].map((n, i) => ({ promptIds: Array.from({ length: n }, (_, j) => (i * 37 + j * 11 + 3) % vocab), params: { maxTokens: 4 } }));
  const e = new LLMEngine(m.model, m.ctx, m.geometry, { maxModelLen: 128, maxNumSeqs: 4, maxNumBatchedTokens: 64, graphs: backend.captureGraphs(), maxGraphBatch: 4 });
  try {
    e.generate(reqs);
  } finally {
    e.dispose();
    m.model.dispose();
  }
  const show = (map: Map<string, Set<string>>) => [...map].map(([op, s]) => `  ${op}: ${[...s].join('; ')}`).join('\n');
  const label = `${name} ${dtype}`;
  console.log(`[${label}] routes off a CUDA kernel:\n${show(new Map([...backend.report.routes].filter(([, s]) => [...s].some((r) => r !== 'kernel'))))}`);
  console.log(`[${label}] gaps:\n${show(backend.report.gaps) || '  none'}`);
  console.log(`[${label}] host transfers inside a captured decode step:\n${[...backend.report.captureTransfers].map((t) => `  ${t}`).join('\n') || '  none'}`);
  return backend.report;
}

const MODELS: [string, Record<string, unknown>][] = [
  ['tiny-gpt-oss', { ...tinyGptOss }],
  ['tiny-gpt-oss-mxfp4', { ...tinyGptOss, quantization_config: { quant_method: 'mxfp4' } }],
  ['tiny-qwen3-next', { ...tinyQwen3Next }],
  ['tiny-kimi-linear', { ...tinyKimiLinear }],
];

describe('CUDA coverage of the tiny models (CPU)', () => {
  for (const [name, raw] of MODELS) {
    for (const dtype of ['f32', 'bf16'] as const) {
      it(`${name} ${dtype}: every op has a CUDA kernel or route; no host transfer inside a captured decode step`, () => {
        const r = coverage(name, raw, dtype);
        expect([...r.gaps.keys()]).toEqual([]);
        expect([...r.captureTransfers]).toEqual([]);
      });
    }
  }
});

describe('the engine GPU tests\' parity check, with CUDA routing on the CPU', () => {
  for (const [name, raw] of MODELS) {
    it(name, () => {
      const backend = new CudaCoverageBackend();
      const r = checkEngineParity(name, { ...raw, initializer_range: 0.5 }, { backend, graphs: backend.captureGraphs() });
      expect(r.graphSteps).toBeGreaterThan(5);
    }, 120_000);
  }
});
