import { definePlugin } from '@fastkernels/core';

/**
 * NCCL backend (issue 10): NCCL communicators and collectives (dlopen'ed libnccl.so.2), the multi-process
 * launcher with its local rendezvous, and vLLM's tensor-parallel layers. The plugin registers nothing in the
 * container: collectives are not a Backend; callers use initDistributed() / NcclCommunicator directly, and the
 * tasks (./tasks.ts) are registered with the model family.
 */
export const ncclPlugin = definePlugin({ name: 'backend-nccl', version: '0.1.0', register: () => {} });

export { NcclError, NcclTimeoutError, makeNcclError } from './errors.js';
export { NCCL_ADDON_FILE, ncclAddonCandidates, tryLoadNcclAddon, type NcclAddon, type WaitResult } from './native.js';
export { NCCL_SONAMES, formatNcclNotFound, ncclDiscoveryEnv, ncclLibraryCandidates, ncclLibraryDirs, type NcclCandidates } from './discovery.js';
export {
  NCCL_DTYPE,
  NCCL_REDUCE_OP,
  NCCL_UNIQUE_ID_BYTES,
  NcclCommunicator,
  defaultTimeoutMs,
  formatNcclVersion,
  ncclAddon,
  ncclUniqueId,
  probeNccl,
  resetNcclProbe,
  type Collectives,
  type CommInitOptions,
  type NcclProbe,
  type ReduceOp,
} from './nccl.js';
export { RENDEZVOUS_HOST, RendezvousServer, newToken, rendezvous, type RendezvousClientOptions, type RendezvousInfo, type RendezvousServerOptions } from './rendezvous.js';
export { launch, rankEnv, runLaunch, type DeviceMode, type LaunchHandle, type LaunchOptions, type LaunchResult, type RankExit } from './launcher.js';
export { initDistributed, joinRendezvous, launchEnv, type Distributed, type LaunchEnv } from './distributed.js';
export * from './parallel/index.js';
export {
  DENSE_LLM_FAMILY,
  allreduceTask,
  columnParallelLinearTask,
  linearReference,
  mergedColumnParallelLinearTask,
  parallelLinearTasks,
  qkvParallelLinearTask,
  rowParallelLinearTask,
  tensorParallelTasks,
} from './tasks.js';
