export { CudaBackend, CudaStorage, CudaTimer } from './backend.js';
export { cudaPlugin } from './plugin.js';
export { cudaKernel, CudaKernel, type CudaKernelSpec } from './kernel.js';
export { CudaRuntime, CudaGraph, CU_FUNC_ATTRIBUTE, formatCudaVersion, type CompileOptions, type CompiledModule, type DeviceProperties, type Dim3, type ProbeResult } from './runtime.js';
export { CudaError, CudaFatalError, STICKY_CUDA_ERRORS, isStickyCudaError, makeCudaError, type CudaLibrary } from './errors.js';
export { CudaCompileError, archFor, formatCompileError, nvrtcOptions, parseCompileLog } from './compile.js';
export { CachingAllocator, GraphPool, roundSize, type AllocatorStats, type DeviceBlock, type RawDeviceMemory } from './allocator.js';
export { LAUNCH_PDL, layoutArgs, parseSignature, writeArgs, LaunchBuffer, type ArgLayout, type ArgType, type ArgValue, type ScalarArgType, type StructArgType } from './args.js';
export { compileCacheKey, cacheRoot, CubinCache } from './cache.js';
export { cudaIncludeDirs, defaultDiscoveryEnv, libraryCandidates, libraryDirs, realFs, sitePackagesDirs, formatNotFound, LIBRARY_NAMES, type DiscoveryEnv, type DiscoveryFs } from './discovery.js';
export { CudaOps, ptrOf, type GemmOptions } from './ops.js';
export { fillLtParams, matrixLayout, ptrAlignment, type GemmDesc } from './blaslt.js';
export { KERNEL_SOURCES } from './kernel-sources.generated.js';
export { addonCandidates, tryLoadAddon, ADDON_FILE, type NativeAddon } from './native.js';
// kernel launch choices: the device's tuning file (tuning/*.json) with FASTKERNELS_TUNING laid over it (docs/tuning.md)
export { PDL_READY_FILES } from './launch-tuning.js';
export { activateDeviceTuning, cudaTuning, deviceTuningFileFor, deviceTuningFiles, effectiveTuning, mergeTuning, parseOverride, readOverrideFile, resetTuning, resolveTuning, withTuning, GENERIC_TUNING_FILE, type EffectiveTuning } from './tuning/load.js';
export { REMOVED_TUNING_VARIABLES, removedVariablesError } from './tuning/removed-variables.js';
export { DeviceTuningFileSchema, OverrideTuningFileSchema, SECTION_NAMES, TUNING_SECTIONS, type DeviceTuningFile, type OverrideTuningFile, type Tuning, type TuningSection } from './tuning/schema.js';
