// Minimal declarations of the NCCL and CUDA driver entry points the addon uses. Written from NCCL's public
// header (nccl.h) and the driver API reference so the addon builds without nccl.h or a CUDA toolkit; every
// function is resolved with dlsym at run time (nothing NCCL or CUDA at link time).
#pragma once
#include <climits>
#include <cstddef>
#include <cstdint>

namespace fkn {

// ---------------------------------------------------------------- NCCL
typedef struct ncclComm* ncclComm_t;
typedef struct CUstream_st* cudaStream_t;  // the runtime's cudaStream_t is the driver's CUstream

constexpr int kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct ncclUniqueId {
  char internal[kUniqueIdBytes];
};

typedef int ncclResult_t;
enum : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,  // NCCL >= 2.29
};

typedef int ncclDataType_t;  // ncclInt8 0 ... ncclBfloat16 9, ncclFloat8e4m3 10, ncclFloat8e5m2 11
typedef int ncclRedOp_t;     // ncclSum 0, ncclProd 1, ncclMax 2, ncclMin 3, ncclAvg 4

constexpr unsigned kConfigMagic = 0xcafebeef;  // NCCL_API_MAGIC
constexpr int kConfigUndefInt = INT_MIN;       // NCCL_CONFIG_UNDEF_INT

// ncclConfig_t as of NCCL 2.17 (ncclConfig_v21700). NCCL reads `size` bytes of it and keeps its own defaults
// for every later field, so this prefix works with any newer library (parseCommConfig copies min(size, its own)).
struct ncclConfig_v21700 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
};
constexpr unsigned kConfigVersion = 21700;  // NCCL_VERSION(2, 17, 0)

// ---------------------------------------------------------------- driver (only what the waits need)
typedef int CUresult;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
enum : int { CUDA_SUCCESS = 0, CUDA_ERROR_NOT_READY = 600 };

}  // namespace fkn
