// For kernels that a host replay also builds (g++ with FK_HOST_REPLAY=1: test/host-cuda.ts, test/warp-mma-host.ts):
// the CUDA headers only on the device; the replay declares its own stand-ins for the CUDA types before the source.
// Included as a file by nvcc; scripts/embed-kernels.mjs inlines it for NVRTC.
#pragma once
#ifndef FK_HOST_REPLAY
#define FK_HOST_REPLAY 0
#endif
#if !FK_HOST_REPLAY
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#endif
