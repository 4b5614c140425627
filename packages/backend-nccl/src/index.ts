import { definePlugin } from '@fastkernels/core';

/**
 * NCCL backend (issue 10): NCCL communicators and collectives (dlopen'ed libnccl.so.2) implementing core's
 * tensor-parallel group contract (Collectives), HostCollectives (the same contract for CPU tensors between threads),
 * and the multi-process launcher with its local rendezvous. vLLM's tensor-parallel layers and their tasks
 * (L1/allreduce, L2/*_parallel_linear) live in model-zoo (layers/parallel, tasks/), over core's TensorParallelGroup;
 * model-zoo's plugin registers the tasks. Collectives are not a Backend: callers use initDistributed() /
 * NcclCommunicator directly. The plugin registers nothing today; registering touches no driver: NCCL is loaded on
 * first use.
 */
export const ncclPlugin = definePlugin({
  name: 'backend-nccl',
  version: '0.2.0',
  register: () => {},
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
export { HostCollectives } from './host-collectives.js';
