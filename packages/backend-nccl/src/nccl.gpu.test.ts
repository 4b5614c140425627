/**
 * NCCL across 2 GPUs: the ranks are started through launch() (one process per GPU, rendezvous, NCCL id from
 * rank 0) and run src/testing/gpu-scenarios.ts. On the GPU host the bundled test file is itself the rank script
 * (FK_GPU_TEST_CHILD + FK_NCCL_SCENARIO); under vitest the ranks run dist/testing/gpu-rank.js (build first).
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CudaRuntime } from '@fastkernels/backend-cuda';
import { launch } from './launcher.js';
import { probeNccl } from './nccl.js';
import { runGpuScenario } from './testing/gpu-scenarios.js';

if (process.env.FK_GPU_TEST_CHILD && process.env.FK_NCCL_SCENARIO) await runGpuScenario();

const G = { tags: ['gpu'], timeout: 240_000 };

function rankScript(): string {
  const self = fileURLToPath(import.meta.url);
  return self.endsWith('.mjs') ? self : fileURLToPath(new URL('../dist/testing/gpu-rank.js', import.meta.url));
}

async function runRanks(scenario: string, nproc = 2, extraEnv: Record<string, string> = {}): Promise<{ reports: any[]; exitCode: number; logs: string[] }> {
  const p = probeNccl();
  if (!p.available) throw new Error(`NCCL unavailable: ${p.reason}`);
  const n = CudaRuntime.probe().deviceCount ?? 0;
  if (n < nproc) throw new Error(`this test needs ${nproc} GPUs (${n} visible)`);
  const dir = mkdtempSync(join(tmpdir(), `fk-nccl-${scenario}-`));
  const logs: string[] = [];
  const h = await launch({
    nproc,
    command: process.execPath,
    args: ['--enable-source-maps', rankScript()],
    env: { ...process.env, FK_GPU_TEST_CHILD: '1', FK_NCCL_SCENARIO: scenario, FK_TEST_OUT: dir, FASTKERNELS_NCCL_TIMEOUT_MS: '60000', ...extraEnv },
    forwardSignals: false,
    killGraceMs: 5000,
    log: (l) => logs.push(l),
    output: (rank, _s, line) => logs.push(`[rank ${rank}] ${line}`),
  });
  const r = await h.result;
  const reports = [...Array(nproc).keys()].map((i) => {
    try {
      return JSON.parse(readFileSync(join(dir, `rank-${i}.json`), 'utf8'));
    } catch {
      return { ok: false, error: `rank ${i} wrote no report (launcher exit ${r.exitCode}):\n${logs.slice(-40).join('\n')}` };
    }
  });
  return { reports, exitCode: r.exitCode, logs };
}

// initDistributed's communicators are blocking (the fast path); FASTKERNELS_NCCL_BLOCKING=0 gives the non-blocking
// ones (every call polled with the deadline). Both must be exact and both must end a stopped peer in a timeout.
// (a loop, not describe.each: the GPU host's vitest shim has no .each)
const MODES: [string, Record<string, string>][] = [
  ['blocking', {}],
  ['non-blocking', { FASTKERNELS_NCCL_BLOCKING: '0' }],
];
for (const [mode, modeEnv] of MODES) describe(`NCCL on 2 GPUs (ranks through the launcher), ${mode} communicators`, () => {
  it('allReduce (f32/bf16/i32, 16 MiB max), allGather, reduceScatter, broadcast, allToAll and the TP layers are exact', G, async () => {
    const { reports, exitCode } = await runRanks('collectives', 2, modeEnv);
    for (const rep of reports) expect(rep.error ?? 'ok').toBe('ok');
    expect(exitCode).toBe(0);
    expect(reports.map((r) => r.checks.device)).toEqual([0, 1]);
    expect(reports.map((r) => r.checks.commDevice)).toEqual([0, 1]);
    for (const rep of reports) for (const k of ['allReduce_f32', 'allReduce_bf16', 'allReduce_i32', 'allReduceMax16MiB', 'allGather', 'reduceScatter', 'broadcast', 'allToAll', 'parallelLinear']) expect(rep.checks[k]).toBe(true);
  });

  it('a peer that stops participating ends in a timeout, an abort and a clear error (no hang)', G, async () => {
    const { reports } = await runRanks('abort', 2, modeEnv);
    const r0 = reports[0];
    expect(r0.error ?? 'ok').toBe('ok');
    expect(r0.checks.timeout).toBe(true);
    expect(r0.checks.message).toMatch(/synchronize on rank 0 of 2 did not complete within 3\.0 s: a peer rank stopped/);
    expect(r0.checks.seconds).toBeLessThan(20);
    expect(r0.checks.aborted).toBe(true);
    expect(r0.checks.afterAbort).toMatch(/was aborted/);
    expect(reports[1].checks.stopped).toBe(true);
  });
});
