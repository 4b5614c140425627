/**
 * The FLUX pipeline on the CUDA coverage backend (cuda-coverage-backend.ts: the CPU backend routed as CUDA would route
 * each op, host reads / writes recorded while a graph is captured): generate-image's run on the tiny-flux fixture with
 * the transformer step captured makes no host transfer inside the capture (on CUDA a synchronous copy fails it), and
 * every op of the run has a CUDA kernel or route. The image equals the eager run's, byte for byte.
 */
import { join } from 'node:path';
import { baselineRegistry, loadPipelineModel } from '@fastkernels/model-zoo';
import { describe, expect, it } from 'vitest';
import { CudaCoverageBackend } from './cuda-coverage-backend.js';

const FIXTURE = join(import.meta.dirname, '../packages/model-zoo/fixtures/tiny-flux');

describe('FLUX transformer step under graph capture, CUDA routing on the CPU', () => {
  for (const dtype of ['f32', 'bf16'] as const) {
    it(`${dtype}: no host transfer inside the captured step, no op without a CUDA route; graphs on = off`, () => {
      const backend = new CudaCoverageBackend();
      const loaded = loadPipelineModel(FIXTURE, { backend, registry: baselineRegistry(), dtype });
      try {
        const req = { prompt: 'a red cube', height: 16, width: 16, steps: 3, seed: 4, maxSequenceLength: 10 };
        const on = loaded.model.generateImage({ ...req, graphs: backend.captureGraphs() });
        const off = loaded.model.generateImage({ ...req, graphs: false });
        const r = backend.report;
        console.log(`[flux ${dtype}] host transfers inside the captured step:\n${[...r.captureTransfers].map((t) => `  ${t}`).join('\n') || '  none'}`);
        console.log(`[flux ${dtype}] gaps:\n${[...r.gaps].map(([op, s]) => `  ${op}: ${[...s].join('; ')}`).join('\n') || '  none'}`);
        expect([...r.captureTransfers]).toEqual([]);
        expect([...r.gaps.keys()]).toEqual([]);
        expect(Buffer.from(on.images[0]!.rgb).equals(Buffer.from(off.images[0]!.rgb))).toBe(true);
      } finally {
        loaded.model.dispose();
      }
    }, 120_000);
  }
});
