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
// the GPU tuning switches (tests and the verify script flip them; the defaults are the H200-verified choice)
export { SAMPLER_TUNING } from './spine/sampler.js';
export { LAUNCH_TUNING, PDL_READY_FILES } from './launch-tuning.js';
export { LINEAR_TUNING } from './spine/linear.js';
export { NORM_TUNING } from './spine/norm.js';
