/**
 * The rank side of `fastkernels launch`: read the launcher's environment, pick the CUDA device, meet the other
 * ranks at the rendezvous (rank 0 brings the NCCL id) and create the NCCL communicator.
 */
import { CudaRuntime } from '@fastkernels/backend-cuda';
export { joinRendezvous, launchEnv, type LaunchEnv } from './launch-env.js';
import { NcclCommunicator, defaultTimeoutMs, ncclUniqueId } from './nccl.js';
import { joinRendezvous, launchEnv } from './launch-env.js';

export interface Distributed {
  readonly rank: number;
  readonly world: number;
  readonly device: number;
  readonly comm: NcclCommunicator;
}

/**
 * Everything a rank needs: the device made current, the rendezvous, the communicator. Throws a clear error
 * outside `fastkernels launch`.
 */
export async function initDistributed(options: { timeoutMs?: number; env?: Readonly<Record<string, string | undefined>> } = {}): Promise<Distributed> {
  const le = launchEnv(options.env);
  if (!le) throw new Error('initDistributed: RANK/WORLD_SIZE/MASTER_PORT/FASTKERNELS_RDZV_TOKEN are not set: start this script with `fastkernels launch --nproc N -- <command>`');
  const rt = CudaRuntime.get();
  if (le.device >= rt.deviceCount) throw new RangeError(`rank ${le.rank}: device ${le.device} does not exist (${rt.deviceCount} visible); launch with --devices split or fewer ranks`);
  rt.setDevice(le.device);
  const timeoutMs = options.timeoutMs ?? defaultTimeoutMs();
  const info = await joinRendezvous(le, ncclUniqueId, timeoutMs);
  if (info.rank !== le.rank || info.world !== le.world) throw new Error(`rendezvous answered rank ${info.rank} of ${info.world}, expected ${le.rank} of ${le.world}`);
  const comm = await NcclCommunicator.init({ rank: le.rank, world: le.world, id: info.id, timeoutMs });
  return { rank: le.rank, world: le.world, device: le.device, comm };
}
