export { CpuBackend, type CpuBackendOptions, type CpuMemoryStats } from './backend.js';
export { CpuStorage } from './storage.js';
export { CpuTimer } from './timer.js';
export { cpuDeviceInfo, lastLevelCacheBytes, parseCacheSize, DEFAULT_LLC_BYTES } from './device.js';
export { cpuPlugin } from './plugin.js';
export { createCpuOps } from './ops/index.js';
export { erf, erfc, geluErf, geluTanh, silu } from './math.js';
export { f64ToBf16Bits } from './codec.js';
export { registerCpuKernels } from './ops/kernels.js';
