import { definePlugin } from '@fastkernels/core';
import { TritonToolchain } from './toolchain.js';

export { tritonKernel, TritonKernel, clearLoadedTritonBinaries, type TritonKernelSpec, type TritonConfig, type TritonGrid, type TritonMeta, type LoadedBinary, type TuneResult } from './kernel.js';
export { TritonToolchain, writeHelperScript, type CompileRequest, type CompileOutcome, type ConstexprValue, type ToolchainOptions } from './toolchain.js';
export { HelperClient, type HelperCommand, type HelperResponse } from './client.js';
export { probeTriton, probeRunner, pythonCandidates, unavailableReason, PROBE_SCRIPT, TORCH_VENV_PYTHON, type TritonAvailability, type ProbeRunner, type ProbeOutput } from './python.js';
export { buildLaunchPlan, parseCompileResult, parsePtxParam, scratchBytes, type CompiledTriton, type LaunchPlan, type PlanParam, type PtxParam } from './metadata.js';
export { TritonCompileError, TritonUnavailableError, TritonOutOfResourcesError, formatTritonError, sourceExcerpt, type HelperErrorJson, type TritonErrorFrame } from './errors.js';
export { parsePythonParams, parseTritonType, inferTypeString, TRITON_DTYPE, type ParamType, type PyParam, type TritonArg } from './signature.js';
export { tritonCacheKey, tritonCacheDir, TritonDiskCache, stableJson } from './cache.js';
export { HELPER_SOURCE } from './helper-source.generated.js';
/** Device address of a CUDA tensor's first element (re-exported from backend-cuda for candidates). */
export { ptrOf } from '@fastkernels/backend-cuda';

/**
 * Whether Triton kernels can be compiled here, for `fastkernels doctor`: the Python that compiles and its
 * Triton version, or the reason (what to install or set). Probes once per process (~0.1 s, does not import
 * Triton); never throws.
 */
export function tritonAvailability(): { available: boolean; reason?: string; python?: string; tritonVersion?: string } {
  const a = TritonToolchain.get().availability();
  return { available: a.available, reason: a.reason, python: a.python, tritonVersion: a.tritonVersion };
}

/**
 * The Triton plugin registers no Backend: Triton kernels run on the CUDA backend (launched through its runtime
 * in the same context and stream). It exists so the CLI can list it and `doctor` can report tritonAvailability().
 */
export const tritonPlugin = definePlugin({ name: 'backend-triton', version: '0.2.0', register: () => {} });
