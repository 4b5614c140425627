import * as backendCpu from '@fastkernels/backend-cpu';
import * as backendCuda from '@fastkernels/backend-cuda';
import * as backendNccl from '@fastkernels/backend-nccl';
import * as backendTriton from '@fastkernels/backend-triton';
import * as core from '@fastkernels/core';
import * as modelZoo from '@fastkernels/model-zoo';

/**
 * The packages a candidate may import, as the running CLI's own module instances. Candidates are
 * bundled with esbuild; imports of '@fastkernels/<pkg>' become a virtual module that reads these
 * namespaces from a global, so a candidate's `Module` and `Tensor` are the harness's very classes
 * (instanceof works), also in the single-file bundle on a host without node_modules.
 */
export const SDK_GLOBAL = Symbol.for('fastkernels.sdk');

export type Sdk = Readonly<Record<string, Readonly<Record<string, unknown>>>>;

export function installSdk(extra: Sdk = {}): Sdk {
  const sdk: Sdk = {
    '@fastkernels/core': core,
    '@fastkernels/backend-cpu': backendCpu,
    '@fastkernels/backend-cuda': backendCuda,
    '@fastkernels/backend-triton': backendTriton,
    '@fastkernels/backend-nccl': backendNccl,
    '@fastkernels/model-zoo': modelZoo,
    ...extra,
  };
  (globalThis as Record<symbol, unknown>)[SDK_GLOBAL] = sdk;
  return sdk;
}
