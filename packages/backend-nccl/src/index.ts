import { TASK_PROVIDER, definePlugin, type TaskProvider } from '@fastkernels/core';
import { DENSE_LLM_FAMILY, tensorParallelTasks } from './tasks.js';

/** The tensor-parallel tasks (L1/allreduce, the L2 parallel linear layers), in the dense LLM family. */
export const tensorParallelProvider: TaskProvider = { family: DENSE_LLM_FAMILY, tasks: () => tensorParallelTasks };

/**
 * NCCL backend (issue 10): NCCL communicators and collectives (dlopen'ed libnccl.so.2), the multi-process
 * launcher with its local rendezvous, and vLLM's tensor-parallel layers. The plugin registers the layers' tasks
 * (a TaskProvider: `fastkernels list` shows them, the baseline registry builds them, the Llama modules use them at
 * world > 1). Collectives are not a Backend: callers use initDistributed() / NcclCommunicator directly. Registering
 * touches no driver: NCCL is loaded on first use.
 */
export const ncclPlugin = definePlugin({
  name: 'backend-nccl',
  version: '0.2.0',
  register: (c) => {
    c.register(TASK_PROVIDER, { useValue: tensorParallelProvider });
  },
});

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
