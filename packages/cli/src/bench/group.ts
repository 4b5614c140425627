/**
 * bench in a process group: the tasks that need a tensor-parallel group (TaskDefinition.worldSize > 1 with
 * rankAwareCases: L1/allreduce and the L2 parallel linear layers) run on W ranks at once, one bench worker per rank, in
 * lockstep. Each rank's harness checks its own output (a layer's shard) against its own float64 reference (the task's
 * part of the group's result) and the candidate against the baseline, as a plain bench does.
 *
 * `fastkernels bench --tp W` re-runs itself as W ranks under the launcher (as generate and e2e do), and a bench started
 * under `fastkernels launch --nproc W` is such a rank too. A rank's bench process does not join NCCL itself (it never
 * runs candidate code): its group worker does. The ranks' workers form a process group of their own, through a second
 * rendezvous derived from the launcher's:
 *   1. rank 0 starts a rendezvous server for the workers (a fresh port and token) and decides which group tasks still
 *      have to run (--resume: its results file);
 *   2. every rank joins the launcher's rendezvous, rank 0 bringing, instead of an NCCL id, the invitation (the
 *      workers' port and token, a shared seed, the tasks to run) in the 128 bytes every rank receives;
 *   3. each rank forks its group worker with RANK/WORLD_SIZE/MASTER_PORT/FASTKERNELS_RDZV_TOKEN of that rendezvous and
 *      its own GPU (all GPUs visible: NCCL's P2P/NVLink path needs its peers); the workers call initDistributed() (rank
 *      0's worker brings the NCCL id) before the integrity guard is installed, and the group is the current one, so
 *      the baseline and the candidate modules are built in it;
 *   4. every rank sends its worker the same tasks with the same cases in the same order, with the same options (the
 *      seeds; a warm-up counted in calls, not milliseconds, so every rank makes the same number of calls; the hidden
 *      shape and the re-verified timed calls drawn from the shared seed), so every collective has its partners. After
 *      each case the workers agree on the worst status of any rank, after each task on whether any rank's worker must
 *      be replaced; rank 0 records the results, the other ranks print nothing.
 * Lockstep assumes what the harness's control flow depends on is the same on every rank: the outputs (a collective
 * gives every rank the same result) and the candidate's behaviour (the same code). A candidate that fails on one rank
 * only leaves the others waiting inside a collective: their watchdog (--stall-timeout) ends the task as TIMEOUT. A
 * group worker that is stopped (a crash, a timeout, a dirty task) is not replaced: the group tasks after it get
 * RUNTIME_ERROR rows saying so (rerun them).
 */
import { randomInt } from 'node:crypto';
import { RendezvousServer, joinRendezvous, newToken, type LaunchEnv } from '@fastkernels/backend-nccl';
import { fmix32, setting, statusOfSeverity, statusSeverity, type Backend, type CaseResult, type TensorParallelGroup } from '@fastkernels/core';

/** What rank 0 sends every rank through the launcher's rendezvous. */
export interface GroupInvite {
  /** The workers' rendezvous (rank 0's bench process hosts it). */
  readonly port: number;
  readonly token: string;
  /** Shared seed of the hidden shapes and re-verified calls. */
  readonly seed: number;
  /** Per group task (sorted by id, as every rank lists them): whether it runs. */
  readonly run: readonly boolean[];
}

const INVITE_BYTES = 128;
const MAGIC = [0x46, 0x4b, 0x42, 0x47]; // "FKBG"
const VERSION = 1;
const MASK_OFFSET = 32;
/** The most group tasks an invitation can carry (one bit each). */
export const MAX_GROUP_TASKS = (INVITE_BYTES - MASK_OFFSET) * 8;

/** The invitation as the 128 bytes the launcher's rendezvous carries. */
export function encodeGroupInvite(inv: GroupInvite): Uint8Array {
  if (!/^[0-9a-f]{32}$/.test(inv.token)) throw new RangeError('group invite: the token must be 32 hex digits');
  if (!Number.isInteger(inv.port) || inv.port < 0 || inv.port > 65535) throw new RangeError(`group invite: port ${inv.port}`);
  if (inv.run.length > MAX_GROUP_TASKS) throw new RangeError(`group invite: ${inv.run.length} tasks, at most ${MAX_GROUP_TASKS}`);
  const b = new Uint8Array(INVITE_BYTES);
  const v = new DataView(b.buffer);
  b.set(MAGIC, 0);
  b[4] = VERSION;
  v.setUint16(6, inv.port, true);
  b.set(Buffer.from(inv.token, 'hex'), 8);
  v.setUint32(24, inv.seed >>> 0, true);
  v.setUint16(28, inv.run.length, true);
  inv.run.forEach((on, i) => {
    if (on) b[MASK_OFFSET + (i >> 3)]! |= 1 << (i & 7);
  });
  return b;
}

export function decodeGroupInvite(b: Uint8Array): GroupInvite {
  if (b.byteLength !== INVITE_BYTES || MAGIC.some((m, i) => b[i] !== m) || b[4] !== VERSION) {
    throw new Error('bench: rank 0 did not send a bench group invitation through the rendezvous (are all ranks running the same `fastkernels bench`?)');
  }
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const n = v.getUint16(28, true);
  return {
    port: v.getUint16(6, true),
    token: Buffer.from(b.subarray(8, 24)).toString('hex'),
    seed: v.getUint32(24, true),
    run: Array.from({ length: n }, (_, i) => ((b[MASK_OFFSET + (i >> 3)]! >> (i & 7)) & 1) === 1),
  };
}

/** A rank's place in the bench group: who it is, and what its group worker joins. */
export interface BenchGroup extends GroupInvite {
  readonly rank: number;
  readonly world: number;
  /** This rank's GPU (the launcher's FASTKERNELS_DEVICE / LOCAL_RANK). */
  readonly device: number;
  /** Rank 0: the workers' rendezvous server (close it when the group is done). */
  readonly server?: RendezvousServer;
}

/**
 * Steps 1-2 of the header, on every rank: rank 0 (which passes `run`, the tasks it wants run) hosts the workers'
 * rendezvous and sends the invitation; the others receive it. Every rank of the launch must call this once.
 */
export async function formBenchGroup(le: LaunchEnv, run: readonly boolean[] | null, timeoutMs = 300_000): Promise<BenchGroup> {
  if (le.rank === 0) {
    if (!run) throw new Error('formBenchGroup: rank 0 decides which group tasks run');
    const token = newToken();
    const server = new RendezvousServer({ world: le.world, token });
    const port = await server.start();
    const invite: GroupInvite = { port, token, seed: randomInt(0, 2 ** 31 - 1), run };
    try {
      await joinRendezvous(le, () => encodeGroupInvite(invite), timeoutMs);
    } catch (e) {
      server.close();
      throw e;
    }
    return { ...invite, rank: 0, world: le.world, device: le.device, server };
  }
  const info = await joinRendezvous(le, () => new Uint8Array(INVITE_BYTES), timeoutMs);
  return { ...decodeGroupInvite(info.id), rank: le.rank, world: le.world, device: le.device };
}

/** The group worker's environment (step 3): the launcher's variables, pointed at the workers' rendezvous. */
export function groupWorkerEnv(g: Pick<BenchGroup, 'rank' | 'world' | 'device' | 'port' | 'token' | 'seed'>): Record<string, string> {
  return {
    RANK: String(g.rank),
    WORLD_SIZE: String(g.world),
    LOCAL_RANK: String(g.rank),
    FASTKERNELS_LOCAL_RANK: String(g.rank),
    MASTER_PORT: String(g.port),
    FASTKERNELS_RDZV_TOKEN: g.token,
    FASTKERNELS_DEVICE: String(g.device),
    [GROUP_SEED_ENV]: String(g.seed),
  };
}

/** Set in a group worker's environment: the shared seed (its presence makes the worker join the group). */
export const GROUP_SEED_ENV = 'FASTKERNELS_BENCH_GROUP_SEED' as const;

/** The group seed this worker was started with, or undefined for an ordinary worker. */
export function groupSeedOf(env: Readonly<Record<string, string | undefined>> = process.env): number | undefined {
  return setting(GROUP_SEED_ENV, env);
}

/** The re-verification / hidden-shape seed of case `index` of `taskId`: the same on every rank. */
export function sharedVerifySeed(groupSeed: number, taskId: string, index: number): number {
  let h = fmix32((groupSeed >>> 0) ^ 0x2545f491);
  for (let i = 0; i < taskId.length; i++) h = fmix32((h ^ taskId.charCodeAt(i)) >>> 0);
  return fmix32((h ^ index) >>> 0) & 0x7fffffff;
}

/**
 * After a case, in every group worker: the worst status any rank saw. A rank whose own result is better takes the
 * worse status (and no timing: the case did not pass on every rank), with the reason.
 */
export function agreeOnCase(group: TensorParallelGroup, on: { readonly backend: Backend; readonly device: number }, r: CaseResult): CaseResult {
  const mine = statusSeverity(r.status);
  const [worst] = group.agree([mine], 'max', on);
  if (worst === mine) return r;
  const status = statusOfSeverity(worst!);
  return {
    ...r,
    status,
    baselineMs: null, candidateMs: null, speedup: null, ciLow: null, ciHigh: null,
    detail: `another rank of the process group: ${status} (rank ${group.rank}: ${r.status}${r.detail ? `: ${r.detail}` : ''})`,
  };
}

/** After a task, in every group worker: whether any rank's worker must be replaced (then every rank's is). */
export function agreeOnDirty(group: TensorParallelGroup, on: { readonly backend: Backend; readonly device: number }, dirty: boolean): boolean {
  return group.agree([dirty ? 1 : 0], 'max', on)[0] === 1;
}
