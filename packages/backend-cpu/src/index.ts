export { CpuBackend, type CpuBackendOptions, type CpuMemoryStats } from './backend.js';
export { CpuStorage } from './storage.js';
export { CpuTimer } from './timer.js';
export { cpuDeviceInfo, lastLevelCacheBytes, parseCacheSize, DEFAULT_LLC_BYTES } from './device.js';
export { cpuPlugin } from './plugin.js';
export { createCpuOps } from './ops/index.js';
export { erf, erfc, geluErf, geluTanh, silu } from './math.js';
/** @deprecated core's numberToBf16 is as fast now (the same float32 round-to-odd path); kept for 0.x callers. */
export { numberToBf16 as f64ToBf16Bits } from '@fastkernels/core';
export { registerCpuKernels } from './ops/kernels.js';
