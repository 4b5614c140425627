import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { Tensor, withContext, type CaseResult } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { loadRow } from '../../bench/worker.js';
import { environment, selectBackend } from '../../env.js';
import { declaredOutcomes, expectedOutcomeLines } from '../expected.js';
import { EsbuildCandidateLoader, listCandidateFiles } from '../loader.js';
import { bindDims, type CudaProgram } from './module.js';
import { hasNvcc, nvccCompile } from './nvcc.js';

const ROOT = resolve(__dirname, '../../../../..');
const DEMO = relative(process.cwd(), join(ROOT, 'examples/candidates/cuda-demo'));

// What NVRTC logs for the demo's rms_norm.cu (program name rms_norm.cu), as captured from nvrtcGetProgramLog.
const CAPTURED_NVRTC_LOG = [
  'rms_norm.cu(40): error: identifier "inv_rsm" is undefined',
  '      store(&y[row * h + j], v * inv_rsm * to_f32(w[j]));',
  '                                 ^',
  '',
  '1 error detected in the compilation of "rms_norm.cu".',
  '',
].join('\n');

const COMPILE_ERROR = new RegExp(`^does not compile: ${DEMO.replace(/[.]/g, '\\.')}/L1/rms_norm\\.cu:40: identifier "inv_rsm" is undefined\\n  > 40 \\|     store\\(&y\\[row \\* h \\+ j\\], v \\* inv_rsm \\* to_f32\\(w\\[j\\]\\)\\);`);

/** What bench makes of a load failure (commands/bench.ts), and the declared-outcome verdict under its table. */
function benchVerdict(taskId: string, message: string): { row: CaseResult; lines: string[] } {
  const row = loadRow({ id: taskId, level: 1 }, 'load', 'bf16', 'RUNTIME_ERROR', `failed to load: ${message}`);
  return { row, lines: expectedOutcomeLines(declaredOutcomes(listCandidateFiles(DEMO)), [row]) };
}

describe('CUDA C++ candidates: loading', () => {
  it('lists .cu candidates; a .cu beside a class of the same stem is that class\'s source, not a candidate', () => {
    expect(listCandidateFiles(DEMO).map((f) => f.relPath.slice(DEMO.length + 1))).toEqual(['L1/l2_norm.cu', 'L1/relu.cu', 'L1/rms_norm.cu', 'L1/silu_and_mul.cu']);
    const dir = mkdtempSync(join(tmpdir(), 'fk-cu-'));
    try {
      mkdirSync(join(dir, 'L1'));
      for (const f of ['relu.cu', 'relu.ts', 'gelu.cu', 'gelu.cu.json', '_util.cuh']) writeFileSync(join(dir, 'L1', f), '');
      expect(listCandidateFiles(dir).map((f) => f.relPath.slice(dir.length + 1))).toEqual(['L1/gelu.cu', 'L1/relu.ts']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!hasNvcc())('compiles the demo set (nvcc, sm_90a): three load, the broken one fails naming its file and line, and bench reports it as declared', async () => {
    const set = await new EsbuildCandidateLoader({ compileCuda: nvccCompile }).load(DEMO, environment().taskMap);
    expect(set.candidates.map((c) => [c.task.id, c.cls.name])).toEqual([['L1/l2_norm', 'L2Norm'], ['L1/relu', 'ReLU'], ['L1/silu_and_mul', 'SiluAndMul']]);
    expect(set.failures.map((f) => f.file.taskId)).toEqual(['L1/rms_norm']);
    expect(set.failures[0]!.error.message).toMatch(COMPILE_ERROR);
    const { row, lines } = benchVerdict('L1/rms_norm', set.failures[0]!.error.message);
    expect(row.status).toBe('RUNTIME_ERROR');
    expect(lines.join('\n')).toMatch(/L1\/rms_norm\s+RUNTIME_ERROR\s+as declared: wrong on purpose/);
  }, 120_000);

  it('maps a captured NVRTC log of the broken candidate to the same error', async () => {
    const compileCuda = async (p: CudaProgram) => {
      if (p.programName === 'rms_norm.cu') throw Object.assign(new Error('NVRTC failed'), { log: CAPTURED_NVRTC_LOG });
    };
    const set = await new EsbuildCandidateLoader({ compileCuda, filter: (f) => f.taskId === 'L1/rms_norm' }).load(DEMO, environment().taskMap);
    expect(set.failures[0]!.error.message).toMatch(COMPILE_ERROR);
    expect(set.failures[0]!.error.details.fix).toMatch(/fix the error at that line/);
  });

  it('on a backend other than cuda the load fails with what to do; without a backend it loads and refuses to run off CUDA', async () => {
    const set = await new EsbuildCandidateLoader({ backend: 'cpu', filter: (f) => f.taskId === 'L1/l2_norm' }).load(DEMO, environment().taskMap);
    expect(set.failures[0]!.error.describe()).toMatch(/l2_norm\.cu: is a CUDA C\+\+ candidate; this run's backend is cpu, which cannot run its kernels\nfix: bench it on a GPU host with --backend cuda/);

    const lazy = await new EsbuildCandidateLoader({ filter: (f) => f.taskId === 'L1/l2_norm' }).load(DEMO, environment().taskMap);
    const env = environment();
    const ctx = { backend: selectBackend(env, 'cpu'), device: 0, dtype: 'f32' as const, registry: env.registry };
    const m = withContext(ctx, () => new lazy.candidates[0]!.cls());
    const x = Tensor.fromArray(ctx.backend, [1, 2, 3, 4], [2, 2], 'f32');
    expect(() => (m.forward as (t: Tensor) => Tensor)(x)).toThrow(/l2_norm\.cu is a CUDA C\+\+ candidate; the cpu backend cannot run it \(bench it with --backend cuda/);
  });

  it('the candidate class has the baseline\'s parameters, so the harness loads the same weights', async () => {
    const set = await new EsbuildCandidateLoader({ compileCuda: async () => {}, filter: (f) => f.taskId === 'L1/rms_norm' }).load(DEMO, environment().taskMap);
    const env = environment();
    const ctx = { backend: selectBackend(env, 'cpu'), device: 0, dtype: 'f32' as const, registry: env.registry };
    const m = withContext(ctx, () => new set.candidates[0]!.cls(48, 1e-5));
    expect(m.namedParameters().map(([k, t]) => [k, t.shape])).toEqual([['weight', [48]]]);
  });

  it('binds dims from random input shapes, folding extra leading dims into the first', () => {
    const spec = [{ name: 'x', dtype: 'act' as const, shape: ['T', 'H'], optional: false }, { name: 'r', dtype: 'act' as const, shape: ['T', 'H'], optional: true }];
    for (let i = 0; i < 50; i++) {
      const b = 1 + Math.floor(Math.random() * 8);
      const s = 1 + Math.floor(Math.random() * 64);
      const h = 1 + Math.floor(Math.random() * 4096);
      const x = { shape: [b, s, h], dtype: 'bf16', itemsize: 2 };
      expect(Object.fromEntries(bindDims(spec, [x, null]))).toEqual({ T: b * s, H: h });
      expect(() => bindDims(spec, [x, { ...x, shape: [b * s, h + 1] }])).toThrow(/dim H is \d+ by an earlier input and \d+ by r/);
    }
  });

  it('the demo README lists every demo file with its expected status', () => {
    const readme = readFileSync(join(ROOT, 'examples/candidates/cuda-demo/README.md'), 'utf8');
    for (const f of listCandidateFiles(DEMO)) {
      const declared = declaredOutcomes([f]).get(f.taskId)!;
      expect(readme).toMatch(new RegExp(`\`${f.relPath.slice(DEMO.length + 1)}\`.*${declared}`));
    }
  });
});
