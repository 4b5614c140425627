/**
 * The launcher's environment as a rank sees it, and the rank side of the rendezvous. No package imports (not even core's
 * settings registry, which declares these variables as internal): the launcher tests run it bundled on its own.
 */
import { rendezvous, type RendezvousInfo } from './rendezvous.js';

export interface LaunchEnv {
  readonly rank: number;
  readonly world: number;
  readonly localRank: number;
  readonly port: number;
  readonly token: string;
  /** The CUDA device index this rank uses (LOCAL_RANK, or 0 when the launcher split CUDA_VISIBLE_DEVICES). */
  readonly device: number;
}

const int = (v: string | undefined): number | undefined => (v !== undefined && /^\d+$/.test(v) ? Number(v) : undefined);

/** The launcher's variables, or undefined when this process was not started by `fastkernels launch`. */
export function launchEnv(env: Readonly<Record<string, string | undefined>> = process.env): LaunchEnv | undefined {
  const rank = int(env.RANK);
  const world = int(env.WORLD_SIZE);
  const port = int(env.MASTER_PORT);
  const token = env.FASTKERNELS_RDZV_TOKEN;
  if (rank === undefined || world === undefined || port === undefined || !token) return undefined;
  const localRank = int(env.LOCAL_RANK) ?? int(env.FASTKERNELS_LOCAL_RANK) ?? rank;
  const device = int(env.FASTKERNELS_DEVICE) ?? localRank;
  if (rank >= world) throw new RangeError(`RANK ${rank} is not below WORLD_SIZE ${world}`);
  return { rank, world, localRank, port, token, device };
}

/** Meet the other ranks: { rank, world, id } with the id made by rank 0 through `makeId`. */
export function joinRendezvous(le: LaunchEnv, makeId: () => Uint8Array, timeoutMs = 300_000): Promise<RendezvousInfo> {
  return rendezvous({ port: le.port, rank: le.rank, token: le.token, makeId: le.rank === 0 ? makeId : undefined, timeoutMs });
}

