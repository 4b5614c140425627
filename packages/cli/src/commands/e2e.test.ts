import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CaptureIndexSchema, UserError } from '@fastkernels/core';
import { E2eReportSchema } from '@fastkernels/macroeval';
import { describe, expect, it } from 'vitest';
import { runCapture } from './capture.js';
import { runE2e } from './e2e.js';
import { ROOT, recordingIo as io, cpuE2eArgs, fixture, tempDir, writeFiles } from './e2e-fixtures.suite.js';

const TINY = fixture('tiny-llama');
const tmp = tempDir('fk-cli-e2e-');

const base = cpuE2eArgs(TINY, { dtype: 'f32', maxModelLen: 128, requests: 'synthetic:5:3-30:3-8:0', latencyBatchSizes: '1,2', repeats: 1 });

describe('fastkernels e2e (CPU)', () => {
  it('--self-test: 100% greedy agreement and a report MacroEval accepts', async () => {
    const out = join(tmp, 'self.json');
    const o = io();
    await runE2e({ ...base, selfTest: true, out, repeats: 2 }, o);
    const report = E2eReportSchema.parse(JSON.parse(readFileSync(out, 'utf8')));
    const m = report.models[0]!;
    expect(m.outcome).toBe('ok');
    expect(m.discrepancies).toEqual([0, 0, 0, 0, 0]);
    expect(m.throughputSpeedup).toBeGreaterThan(0);
    expect(m.latencySpeedup).toBeGreaterThan(0);
    // the self-test times the throughput workload three times by default: both speedups come with intervals
    expect(m.throughputSpeedupCi).toHaveLength(2);
    expect(m.latencySpeedupCi).toHaveLength(2);
    expect(o.stdout).toMatch(/tiny-llama: ok, throughput [\d.]+x \[[\d.]+, [\d.]+\], latency [\d.]+x \[[\d.]+, [\d.]+\], exact agreement 5\/5/);
    expect(o.stderr).toMatch(/memory budget:/);
  });

  it('drops a wrong and a throwing candidate file with their categories; keeps the as-is result', async () => {
    const dir = writeFiles(join(tmp, 'cands'), {
      'L1/silu_and_mul.ts': `import { Module, type Tensor } from '@fastkernels/core';
export class SiluAndMul extends Module {
  forward(x: Tensor): Tensor { return this.ctx.backend.ops.siluAndMul(x).fill_(1); }
}`,
      'L1/rotary_emb.ts': `import { Module } from '@fastkernels/core';
export class RotaryEmbedding extends Module {
  constructor(...args: unknown[]) { super(); void args; }
  forward(...args: unknown[]): never { void args; throw new Error('kernel crashed (simulated)'); }
}`,
    });
    const out = join(tmp, 'cands.json');
    await runE2e({ ...base, candidates: dir, workload: 'throughput', out }, io());
    const m = E2eReportSchema.parse(JSON.parse(readFileSync(out, 'utf8'))).models[0]!;
    expect(m.drops.map((d) => [d.task, d.category])).toEqual([['L1/rotary_emb', 'runtime'], ['L1/silu_and_mul', 'incorrect']]);
    expect(m.outcome).toBe('ok');
    expect(m.asIs?.outcome).toBe('crash');
    expect(m.requested).toEqual(['L1/rotary_emb', 'L1/silu_and_mul']);
  });

  it('bad input is a UserError naming the cause: malformed workload line, a model that does not fit, candidates that fail to load', async () => {
    const wl = join(tmp, 'bad.jsonl');
    writeFileSync(wl, '{"prompt_ids":[1,2],"output_len":3}\n{"prompt_ids":[1,2],"output_len":\n');
    await expect(runE2e({ ...base, selfTest: true, requests: wl }, io())).rejects.toThrow(/line 2: not valid JSON/);
    await expect(runE2e({ ...base, selfTest: true, gpuMemoryUtilization: 1e-9 }, io())).rejects.toThrow(UserError);
    await expect(runE2e({ ...base, selfTest: true, gpuMemoryUtilization: 1e-9 }, io())).rejects.toThrow(/the model does not fit/);
    const bad = writeFiles(join(tmp, 'bad-cands'), { 'L1/rms_norm.ts': 'export class Nope {}' });
    await expect(runE2e({ ...base, candidates: bad }, io())).rejects.toThrow(/1 candidate file failed to load/);
    await expect(runE2e({ ...base, selfTest: true, throughputRepeats: 0 }, io())).rejects.toMatchObject({ details: { field: '--throughput-repeats' }, message: expect.stringMatching(/from 1 to 100, got 0/) });
  });

  it('.cu candidates load for the run\'s backend: on the CPU the load fails naming it (exit 2); --keep-going records import drops', async () => {
    const cu = join(ROOT, 'examples/candidates/cuda-demo');
    await expect(runE2e({ ...base, candidates: cu, workload: 'throughput' }, io())).rejects.toThrow(/this run's backend is cpu, which cannot run its kernels/);
    const out = join(tmp, 'cu-cpu.json');
    const o = io();
    await runE2e({ ...base, candidates: cu, workload: 'throughput', keepGoing: true, out }, o);
    const m = E2eReportSchema.parse(JSON.parse(readFileSync(out, 'utf8'))).models[0]!;
    expect(m.drops.map((d) => [d.task, d.category])).toEqual([['L1/l2_norm', 'import'], ['L1/relu', 'import'], ['L1/rms_norm', 'import'], ['L1/silu_and_mul', 'import']]);
    expect(m.outcome).toBe('ok');
    expect(m.graphs).toBeUndefined(); // nothing deployed, nothing to turn graphs off for (and the CPU has none)
  });

  it('capture writes an index the bench reader accepts', () => {
    const out = join(tmp, 'cap');
    const o = io();
    runCapture({ ...base, model: TINY, workload: 'synthetic:3:4-20:2-4:0', out }, o);
    const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')));
    expect(index.tasks['L4/llama']!.forward.length).toBeGreaterThan(0);
    expect(o.stdout).toMatch(/wrote .*index\.json/);
  });
});
