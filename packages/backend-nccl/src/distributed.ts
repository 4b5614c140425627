/**
 * The rank side of `fastkernels launch`: read the launcher's environment, pick the CUDA device, meet the other
 * ranks at the rendezvous (rank 0 brings the NCCL id) and create the NCCL communicator.
 */
import { CudaRuntime } from '@fastkernels/backend-cuda';
export { joinRendezvous, launchEnv, type LaunchEnv } from './launch-env.js';
import { NcclCommunicator, defaultTimeoutMs, ncclUniqueId } from './nccl.js';
import { joinRendezvous, launchEnv } from './launch-env.js';
import { setting } from '@fastkernels/core';

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
export async function initDistributed(options: { timeoutMs?: number; blocking?: boolean; env?: Readonly<Record<string, string | undefined>> } = {}): Promise<Distributed> {
  const le = launchEnv(options.env);
  if (!le) throw new Error('initDistributed: RANK/WORLD_SIZE/MASTER_PORT/FASTKERNELS_RDZV_TOKEN are not set: start this script with `fastkernels launch --nproc N -- <command>`');
  const rt = CudaRuntime.get();
  if (le.device >= rt.deviceCount) throw new RangeError(`rank ${le.rank}: device ${le.device} does not exist (${rt.deviceCount} visible); launch with --devices split or fewer ranks`);
  rt.setDevice(le.device);
  const timeoutMs = options.timeoutMs ?? defaultTimeoutMs();
  const info = await joinRendezvous(le, ncclUniqueId, timeoutMs);
  if (info.rank !== le.rank || info.world !== le.world) throw new Error(`rendezvous answered rank ${info.rank} of ${info.world}, expected ${le.rank} of ${le.world}`);
  // Blocking by default, as torch.distributed and vLLM create theirs: a non-blocking communicator hands every
  // collective to a helper thread (ncclInProgress, then a poll), which cost ~100 us a call on the H200 x2 (run 9:
  // 127 us for a 1 MB all-reduce against torch's 22 us) and keeps the launch off the capturing thread in graph
  // capture. Hangs stay bounded: the rendezvous has every rank alive before init, and synchronize() polls the
  // stream with the deadline and aborts (NCCL kernels watch the abort flag). FASTKERNELS_NCCL_BLOCKING=0 opts out.
  const env = options.env ?? process.env;
  const blocking = options.blocking ?? setting('FASTKERNELS_NCCL_BLOCKING', env);
  const comm = await NcclCommunicator.init({ rank: le.rank, world: le.world, id: info.id, timeoutMs, blocking });
  return { rank: le.rank, world: le.world, device: le.device, comm };
}
