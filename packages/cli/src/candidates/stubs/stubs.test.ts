import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { benchTask, type CaseResult } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { environment, selectBackend } from '../../env.js';
import { stubFiles, type StubLang } from '../../commands/stubs.js';
import { hasNvcc, nvccCompile } from '../cuda/nvcc.js';
import { EsbuildCandidateLoader } from '../loader.js';
import { NAIVE_CUDA_TASKS } from './cuda.js';
import { SIMPLE_TRITON_TASKS } from './triton.js';
import { REFERENCE_TORCH_TASKS } from './torch.js';

// Tasks with a working kernel in the stub, and two without (their stubs run the baseline or raise).
const TASKS = ['L1/silu_and_mul', 'L1/rms_norm', 'L1/relu', 'L1/l2_norm', 'L1/softmax'];
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function writeStubs(lang: StubLang, tasks = TASKS): string {
  const dir = mkdtempSync(join(tmpdir(), `fk-stubs-${lang}-`));
  dirs.push(dir);
  const env = environment();
  for (const id of tasks) {
    for (const f of stubFiles(env.taskMap.get(id)!, lang)) {
      mkdirSync(dirname(join(dir, f.rel)), { recursive: true });
      writeFileSync(join(dir, f.rel), f.text);
    }
  }
  return dir;
}

/** Bench one loaded candidate set's task on the CPU backend (CI cases, a few timed calls), as the bench worker does. */
async function benchOnCpu(dir: string, taskId: string): Promise<CaseResult[]> {
  const env = environment();
  const set = await new EsbuildCandidateLoader({ filter: (f) => f.taskId === taskId }).load(dir, env.taskMap);
  expect(set.failures.map((f) => f.error.describe())).toEqual([]);
  const candidate = env.registry.child('stubs');
  candidate.override(taskId, set.candidates[0]!.cls);
  return benchTask({ task: env.taskMap.get(taskId)!, baseline: env.registry, candidate, backend: selectBackend(env, 'cpu'), iters: 3, warmup: 1, warmupMs: 0 });
}

describe('fastkernels stubs --lang', () => {
  it('the stubs of every language give every task its production class name', () => {
    const env = environment();
    for (const id of TASKS) {
      const t = env.taskMap.get(id)!;
      expect(stubFiles(t, 'ts')[0]!.text).toContain(`export class ${t.className} extends Module`);
      expect(stubFiles(t, 'triton').find((f) => f.rel.endsWith('.ts'))!.text).toContain(`export class ${t.className} extends Module`);
      expect(stubFiles(t, 'torch')[0]!.text).toContain(`class ${t.className}(torch.nn.Module):`);
      expect(JSON.parse(stubFiles(t, 'cuda').find((f) => f.rel.endsWith('.cu.json'))!.text).task).toBe(id);
    }
    expect(stubFiles(env.taskMap.get('L1/rms_norm')!, 'torch')[0]!.text).toMatch(/def __init__\(self, hidden_size, eps=0\.000001\):[\s\S]*def forward\(self, x, residual=None\):[\s\S]*F\.rms_norm/);
    expect([NAIVE_CUDA_TASKS, SIMPLE_TRITON_TASKS, REFERENCE_TORCH_TASKS].every((l) => l.includes('L1/silu_and_mul'))).toBe(true);
  });

  it('ts stubs load, and bench on the CPU backend as written (NotImplemented: RUNTIME_ERROR naming the class)', async () => {
    const rows = await benchOnCpu(writeStubs('ts'), 'L1/silu_and_mul');
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      expect(r.status).toBe('RUNTIME_ERROR');
      expect(r.detail).toContain('NotImplemented: SiluAndMul.forward (L1/silu_and_mul)');
    }
  });

  it('triton stubs load and bench on the CPU backend as written (the baseline off CUDA): every case PASSED', async () => {
    const dir = writeStubs('triton');
    for (const id of ['L1/silu_and_mul', 'L1/l2_norm']) {
      for (const r of await benchOnCpu(dir, id)) expect(r.status, `${r.task} ${r.case}: ${r.detail}`).toBe('PASSED');
    }
  }, 120_000);

  it('cuda stubs load: manifests valid and bound to their kernels', async () => {
    const set = await new EsbuildCandidateLoader({ compileCuda: async () => {} }).load(writeStubs('cuda'), environment().taskMap);
    expect(set.failures.map((f) => f.error.describe())).toEqual([]);
    expect(set.candidates.map((c) => c.task.id).sort()).toEqual([...TASKS].sort());
  });

  it.skipIf(!hasNvcc())('cuda stubs compile with nvcc for sm_90a', async () => {
    const set = await new EsbuildCandidateLoader({ compileCuda: (p) => nvccCompile(p) }).load(writeStubs('cuda'), environment().taskMap);
    expect(set.failures.map((f) => f.error.describe())).toEqual([]);
    expect(set.candidates).toHaveLength(TASKS.length);
  }, 120_000);

  it.skipIf(spawnSync('python3', ['--version']).status !== 0)('torch and triton stubs are valid Python (py_compile)', () => {
    for (const lang of ['torch', 'triton'] as const) {
      const dir = writeStubs(lang);
      const files = TASKS.flatMap((id) => stubFiles(environment().taskMap.get(id)!, lang)).filter((f) => f.rel.endsWith('.py')).map((f) => join(dir, f.rel));
      expect(files.length).toBe(TASKS.length);
      const r = spawnSync('python3', ['-m', 'py_compile', ...files], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
    }
  });
});
