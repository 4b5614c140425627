import { CpuBackend } from '@fastkernels/backend-cpu';
import { RendezvousServer, launchEnv, newToken, rendezvous, type LaunchEnv } from '@fastkernels/backend-nccl';
import { allreduceTask, rowParallelLinearTask } from '@fastkernels/model-zoo';
import { TensorParallelGroup, statusSeverity, type CaseResult } from '@fastkernels/core';
import { FakePeer } from '@fastkernels/core/testing';
import { describe, expect, it } from 'vitest';
import { agreeOnCase, agreeOnDirty, decodeGroupInvite, encodeGroupInvite, formBenchGroup, groupSeedOf, groupWorkerEnv, sharedVerifySeed } from './group.js';
import { benchGroupWorld, runsInGroup, worldSizeSkipReason } from './world-size.js';

describe('bench group: the invitation rank 0 sends through the launcher\'s rendezvous', () => {
  it('round-trips the workers\' port and token, the shared seed and which group tasks run', () => {
    const inv = { port: 40123, token: newToken(), seed: 2 ** 31 - 5, run: [true, false, true, ...Array.from({ length: 70 }, (_, i) => i % 3 === 0)] };
    expect(decodeGroupInvite(encodeGroupInvite(inv))).toEqual(inv);
    expect(encodeGroupInvite(inv).byteLength).toBe(128); // what the rendezvous carries (an NCCL id's size)
  });

  it('refuses what is not an invitation (a rank 0 running another command) and bad fields', () => {
    expect(() => decodeGroupInvite(new Uint8Array(128))).toThrow(/did not send a bench group invitation/);
    expect(() => encodeGroupInvite({ port: 1, token: 'xyz', seed: 0, run: [] })).toThrow(/32 hex digits/);
  });

  it('forms the group: every rank learns the workers\' rendezvous, where the workers then meet (no NCCL needed to get there)', async () => {
    const token = newToken();
    const launcher = new RendezvousServer({ world: 2, token });
    const port = await launcher.start();
    const le = (rank: number): LaunchEnv => ({ rank, world: 2, localRank: rank, port, token, device: rank });
    try {
      const [g0, g1] = await Promise.all([formBenchGroup(le(0), [true, false, true], 10_000), formBenchGroup(le(1), null, 10_000)]);
      expect(g0.server).toBeDefined();
      expect({ ...g1, rank: 0, device: 0 }).toEqual({ port: g0.port, token: g0.token, seed: g0.seed, run: [true, false, true], rank: 0, world: 2, device: 0 });
      expect(g0.token).not.toBe(token);
      // each group worker's environment reads as a launched rank's, pointed at the workers' rendezvous
      for (const g of [g0, g1]) {
        const env = groupWorkerEnv(g);
        expect(launchEnv(env)).toMatchObject({ rank: g.rank, world: 2, port: g0.port, token: g0.token, device: g.rank });
        expect(groupSeedOf(env)).toBe(g0.seed);
      }
      const id = new Uint8Array(128).fill(7);
      const met = await Promise.all([0, 1].map((r) => rendezvous({ port: g0.port, rank: r, token: g0.token, timeoutMs: 10_000, ...(r === 0 ? { makeId: () => id } : {}) })));
      expect(met.map((m) => [m.rank, m.world, m.id[5]])).toEqual([[0, 2, 7], [1, 2, 7]]);
      g0.server!.close();
    } finally {
      launcher.close();
    }
  });

  it('the verify seed is the same on every rank, and differs per task and case', () => {
    expect(sharedVerifySeed(5, 'L1/allreduce', 0)).toBe(sharedVerifySeed(5, 'L1/allreduce', 0));
    expect(new Set([sharedVerifySeed(5, 'L1/allreduce', 0), sharedVerifySeed(5, 'L1/allreduce', 1), sharedVerifySeed(6, 'L1/allreduce', 0), sharedVerifySeed(5, 'L1/other', 0)]).size).toBe(4);
    expect(groupSeedOf({})).toBeUndefined();
  });
});

describe('bench group: what the workers agree on', () => {
  const on = { backend: new CpuBackend(), device: 0 };
  const row = (status: CaseResult['status']): CaseResult => ({
    task: 'L1/allreduce', level: 1, case: 'small-f32', dtype: 'f32', status, maxAbsError: 0, maxRelError: 0, matchedRatio: 1,
    baselineMs: 1, candidateMs: 1, speedup: 1, ciLow: 0.9, ciHigh: 1.1, rounds: 3, iters: 5,
  });

  it('a case takes the worst status of any rank (without timing), with the reason', () => {
    const peerFailed = new TensorParallelGroup(0, 2, new FakePeer([statusSeverity('RUNTIME_ERROR')]));
    const r = agreeOnCase(peerFailed, on, row('PASSED'));
    expect(r).toMatchObject({ status: 'RUNTIME_ERROR', speedup: null, baselineMs: null, detail: 'another rank of the process group: RUNTIME_ERROR (rank 0: PASSED)' });
    const peerPassed = new TensorParallelGroup(0, 2, new FakePeer([0]));
    expect(agreeOnCase(peerPassed, on, row('INCORRECT_NUMERICAL')).status).toBe('INCORRECT_NUMERICAL');
    expect(agreeOnCase(peerPassed, on, row('PASSED'))).toEqual(row('PASSED'));
  });

  it('a worker is replaced on every rank when it must be on any', () => {
    expect(agreeOnDirty(new TensorParallelGroup(0, 2, new FakePeer([1])), on, false)).toBe(true);
    expect(agreeOnDirty(new TensorParallelGroup(0, 2, new FakePeer([0])), on, false)).toBe(false);
  });
});

describe('which tasks bench runs in a process group', () => {
  it('the group size: --tp N, else the launch\'s, else 1', () => {
    expect(benchGroupWorld(2, {})).toBe(2);
    expect(benchGroupWorld(1, { RANK: '0', WORLD_SIZE: '2', MASTER_PORT: '1', FASTKERNELS_RDZV_TOKEN: 't' })).toBe(2);
    expect(benchGroupWorld(1, {})).toBe(1);
  });

  it('L1/allreduce and the parallel linear layers (rank-aware cases) run in a group of 2 or more; a group task without rank-aware cases is skipped with the reason; no group: the fix', () => {
    for (const task of [allreduceTask, rowParallelLinearTask]) {
      expect(runsInGroup(task, 2)).toBe(true);
      expect(runsInGroup(task, 4)).toBe(true);
      expect(worldSizeSkipReason(task, 2)).toBeNull();
      expect(runsInGroup(task, 1)).toBe(false);
    }
    expect(runsInGroup({ worldSize: 2, rankAwareCases: false }, 2)).toBe(false);
    expect(worldSizeSkipReason({ worldSize: 2, rankAwareCases: false }, 2)).toMatch(/its cases describe the whole, unsharded layer/);
    expect(worldSizeSkipReason(rowParallelLinearTask, 1)).toMatch(/^needs a process group of world size 2; run `fastkernels bench --tp 2`/);
    expect(worldSizeSkipReason(allreduceTask, 1)).toBe('needs a process group of world size 2; run `fastkernels bench --tp 2` (or bench under `fastkernels launch --nproc 2`) on 2 GPUs');
    expect(worldSizeSkipReason({ worldSize: 1, rankAwareCases: false }, 1)).toBeNull();
  });
});
