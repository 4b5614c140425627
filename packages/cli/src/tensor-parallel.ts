/**
 * `--tp N` for generate, e2e and bench: the command re-executes itself as N ranks under backend-nccl's launcher (one
 * process per GPU, NCCL rendezvous; the same node, CLI entry and arguments, which include --tp, so each rank takes the
 * rank path). What can be checked before starting N processes (the model splits over N, the backend, the GPU count,
 * NCCL, the command's own input) is checked in the parent, so bad input exits 2 at once. In the model commands each
 * rank joins the group and builds its shard of the model; rank 0 prints and writes files, the others stay quiet (their
 * errors still reach stderr through main()). bench's ranks do not join a group themselves: their bench workers do
 * (bench/group.ts).
 */
import { initDistributed, launchEnv, probeNccl, runLaunch } from '@fastkernels/backend-nccl';
import { TensorParallelGroup, UserError, setTensorParallelGroup, type Backend } from '@fastkernels/core';
import { checkModelTensorParallel, type DecoderGeometry } from '@fastkernels/model-zoo';
import { LaunchExitError } from './commands/launch.js';
import { intFlag } from './flags.js';
import type { Io } from './io.js';

export const TP_HELP = 'tensor parallelism over N GPUs: the command re-runs itself as N ranks under `fastkernels launch` (one process per GPU, NCCL), each holding 1/N of the attention heads, the MLP and the LM head; rank 0 prints';

export function tpFlag(value: unknown): number {
  return intFlag('tp', value ?? 1, 1, 64);
}

/** This process's part in a `--tp N` run. */
export type TensorParallelRole = { kind: 'single' } | { kind: 'parent' } | { kind: 'rank'; rank: number; world: number };

export function tensorParallelRole(tp: number, env: Readonly<Record<string, string | undefined>> = process.env): TensorParallelRole {
  if (tp === 1) return { kind: 'single' };
  const le = launchEnv(env);
  if (!le) return { kind: 'parent' };
  if (le.world !== tp) throw new UserError(`--tp ${tp} inside a launch of ${le.world} ranks`, { field: '--tp', fix: `run with --tp ${le.world}, or without \`fastkernels launch\` (--tp launches the ranks itself)` });
  return { kind: 'rank', rank: le.rank, world: le.world };
}

/** The model splits over `tp` ranks (its architecture's check): exit 2 naming config.json otherwise. Returns its geometry. */
export function checkTensorParallelModel(tp: number, modelDir: string): DecoderGeometry {
  return checkModelTensorParallel(modelDir, tp).geometry;
}

/** The backend is CUDA with `tp` GPUs and NCCL loads: exit 2 with the fix otherwise. */
export function checkTensorParallelDevices(tp: number, backend: Backend): void {
  if (backend.name !== 'cuda') {
    throw new UserError(`tensor parallelism runs on the cuda backend (NCCL between GPUs); this run would use ${backend.name}`, {
      field: '--tp',
      fix: 'run on a host with NVIDIA GPUs (--backend cuda), or drop --tp',
    });
  }
  const gpus = backend.devices().length;
  if (gpus < tp) throw new UserError(`--tp ${tp} needs ${tp} GPUs, ${gpus} visible`, { field: '--tp', fix: `use --tp ${Math.max(1, gpus)} or less, or check CUDA_VISIBLE_DEVICES` });
  const nccl = probeNccl();
  if (!nccl.available) throw new UserError(`NCCL is not usable: ${nccl.reason}`, { field: '--tp', fix: 'run `fastkernels doctor`; set FASTKERNELS_NCCL_LIB_DIRS to the folder of libnccl.so.2' });
}

/** The parent's checks of a model command: the model splits over `tp` ranks, then the devices. Returns the config. */
export function checkTensorParallelRun(tp: number, modelDir: string, backend: Backend): DecoderGeometry {
  const config = checkTensorParallelModel(tp, modelDir);
  checkTensorParallelDevices(tp, backend);
  return config;
}

/** What a model command's body runs with: this rank (0 of 1 without --tp), its device, and where it may print. */
export interface RankRun {
  readonly rank: number;
  readonly world: number;
  /** The rank's CUDA device (undefined without --tp: the command's default). */
  readonly device?: number;
  /** The command's io on rank 0, QUIET_IO on the others. */
  readonly io: Io;
  /** Rank 0 (or the only process): the one that prints and writes --out files. */
  readonly primary: boolean;
}

/**
 * The `--tp N` driver shared by the model commands (generate, e2e). tp 1: `body` runs here, as always. tp > 1
 * outside a launch: `preflight` (the parent's checks: bad input exits 2 here, before any rank starts), then this very
 * command line again as N ranks (relaunchAsRanks); resolves when every rank succeeded. Inside a launched rank: join
 * the group (device, rendezvous, communicator), run `body` as that rank, leave the group.
 */
export async function runWithTensorParallel(
  spec: {
    readonly tp: number;
    readonly io: Io;
    readonly rawArgs: readonly string[];
    readonly preflight: () => void | Promise<void>;
    /** The environment the role is read from (default process.env; tests). */
    readonly env?: Readonly<Record<string, string | undefined>>;
    readonly relaunch?: RelaunchOptions;
  },
  body: (run: RankRun) => Promise<void>,
): Promise<void> {
  const role = tensorParallelRole(spec.tp, spec.env);
  if (role.kind === 'single') return body({ rank: 0, world: 1, io: spec.io, primary: true });
  if (role.kind === 'parent') {
    await spec.preflight();
    return relaunchAsRanks(spec.tp, spec.rawArgs, spec.io, spec.relaunch);
  }
  const group = await joinTensorParallelGroup();
  try {
    await body({ rank: group.rank, world: group.world, device: group.device, io: group.rank === 0 ? spec.io : QUIET_IO, primary: group.rank === 0 });
  } finally {
    group.close();
  }
}

/** For tests: another script than the CLI's entry, and where the ranks' output goes. */
export interface RelaunchOptions {
  readonly entry?: string;
  readonly execArgv?: readonly string[];
  readonly output?: 'inherit' | 'prefix' | ((rank: number, stream: 'stdout' | 'stderr', line: string) => void);
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** A SIGINT/SIGTERM forwarded to the ranks, every rank then exiting 0, is a success (serve: Ctrl-C is its stop). */
  readonly interruptIsSuccess?: boolean;
}

/**
 * Run this very command line again as `tp` ranks (same node, same CLI entry, same arguments, which include --tp, so
 * each rank takes the rank path). Resolves when every rank succeeded; a failed rank is a LaunchExitError carrying
 * its exit code (2 for a rank's bad input), after the launcher has stopped the others.
 */
export async function relaunchAsRanks(tp: number, rawArgs: readonly string[], io: Io, options: RelaunchOptions = {}): Promise<void> {
  const entry = options.entry ?? process.argv[1];
  if (!entry) throw new Error('--tp: cannot tell which script is the CLI (process.argv[1] is empty)');
  const r = await runLaunch({
    nproc: tp,
    command: process.execPath,
    args: [...(options.execArgv ?? process.execArgv), entry, ...rawArgs],
    devices: 'all',
    output: options.output ?? 'inherit',
    log: (l) => io.err(`${l}\n`),
    ...(options.env ? { env: options.env } : {}),
  });
  if (r.exitCode === 0) return;
  if (options.interruptIsSuccess && r.interrupted && !r.failed && !r.error && r.ranks.every((x) => x.code === 0 && !x.signal)) return;
  const why = r.failed ? r.failed.reason : r.interrupted ? `interrupted by ${r.interrupted}` : (r.error ?? `a rank exited with ${r.exitCode}`);
  throw new LaunchExitError(`--tp ${tp}: ${why}`, r.exitCode);
}

/** In a launched rank: pick the GPU, meet the others, make the group current. Returns the device and a teardown. */
export async function joinTensorParallelGroup(): Promise<{ rank: number; world: number; device: number; close: () => void }> {
  const d = await initDistributed();
  setTensorParallelGroup(TensorParallelGroup.of(d));
  return {
    rank: d.rank,
    world: d.world,
    device: d.device,
    close: () => {
      setTensorParallelGroup(TensorParallelGroup.single());
      if (!d.comm.isAborted) d.comm.destroy({ timeoutMs: 30_000 });
    },
  };
}

/** Output of ranks other than 0: nothing (errors still go to stderr through main()). */
export const QUIET_IO: Io = { out: () => {}, err: () => {} };
