// Minimal declarations of the CUDA driver API, NVRTC and cuBLASLt used by the addon.
// Written from the public API documentation so the addon builds without a CUDA toolkit;
// every function is resolved with dlsym at run time (nothing CUDA at link time).
#pragma once
#include <cstddef>
#include <cstdint>

namespace fk {

// ---------------------------------------------------------------- driver API
typedef int CUresult;  // CUDA_SUCCESS = 0
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUgraphNode_st* CUgraphNode;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;  // CU_IPC_HANDLE_SIZE = 64

enum : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_NOT_READY = 600,
};

// CUdevice_attribute values we query.
enum : int {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

// CUfunction_attribute
enum : int {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum : unsigned { CU_STREAM_NON_BLOCKING = 0x1 };
enum : unsigned { CU_EVENT_DEFAULT = 0x0, CU_EVENT_DISABLE_TIMING = 0x2 };
enum : unsigned { CU_MEMHOSTALLOC_PORTABLE = 0x01 };
// CUstreamCaptureMode / CUstreamCaptureStatus
enum : int { CU_STREAM_CAPTURE_MODE_GLOBAL = 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1, CU_STREAM_CAPTURE_MODE_RELAXED = 2 };
enum : int { CU_STREAM_CAPTURE_STATUS_NONE = 0, CU_STREAM_CAPTURE_STATUS_ACTIVE = 1, CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2 };

// Used by cuGraphExecUpdate_v2 (CUDA 12+).
struct CUgraphExecUpdateResultInfo {
  int result;
  CUgraphNode errorNode;
  CUgraphNode errorFromNode;
};

#define FK_CU_LAUNCH_PARAM_END ((void*)0x00)

// cuLaunchKernelEx (CUDA 12+) with one launch attribute: programmatic dependent launch (Hopper). Layouts as in cuda.h:
// the attribute value is a 64-byte union, 8-aligned, after the 4-byte id and its padding.
enum : int { CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmaticStreamSerializationAllowed;
    void* align8;
  } value;
};
static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute layout");
// cuGraphGetEdges_v2 (CUDA 12.3+): one edge's ports and type (0 = full completion; a programmatic edge has type 1 and
// leaves a kernel node from port 1, programmatic, or 2, launch order).
struct CUgraphEdgeData {
  unsigned char from_port;
  unsigned char to_port;
  unsigned char type;
  unsigned char reserved[5];
};
static_assert(sizeof(CUgraphEdgeData) == 8, "CUgraphEdgeData layout");
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned numAttrs;
};

// cuTensorMapEncodeTiled (CUDA 12.0+): the TMA descriptor of a tiled box over a tensor in global memory. CUtensorMap is
// 128 opaque bytes (cuda.h 12.x aligns it to 64, 13.x to 128: the stricter one here, for the map the driver writes); the
// enums are passed as their int values (from TypeScript: src/tensor-map.ts).
struct alignas(128) CUtensorMap {
  unsigned long long opaque[16];
};
static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap layout");
typedef unsigned long long cuuint64_t;
typedef unsigned int cuuint32_t;
typedef CUresult (*FkTensorMapEncodeTiled)(CUtensorMap*, int /* CUtensorMapDataType */, cuuint32_t rank, void* globalAddress,
                                           const cuuint64_t* globalDim, const cuuint64_t* globalStrides /* bytes, rank - 1 */,
                                           const cuuint32_t* boxDim, const cuuint32_t* elementStrides, int /* interleave */,
                                           int /* swizzle */, int /* l2Promotion */, int /* oobFill */);

// ---------------------------------------------------------------- NVRTC
typedef int nvrtcResult;  // NVRTC_SUCCESS = 0
typedef struct _nvrtcProgram* nvrtcProgram;

// ---------------------------------------------------------------- cuBLASLt
typedef int cublasStatus_t;  // CUBLAS_STATUS_SUCCESS = 0
typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque_st* cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque_st* cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque_st* cublasLtMatmulPreference_t;
struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
static_assert(sizeof(cublasLtMatmulHeuristicResult_t) == 96, "cublasLtMatmulHeuristicResult_t layout");

enum : int {  // cublasLtMatmulDescAttributes_t
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
};
enum : int {  // cublasLtMatrixLayoutAttribute_t
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
};
enum : int {  // cublasLtMatmulPreferenceAttributes_t
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};
enum : int { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4 };
enum : int { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum : int { CUBLAS_COMPUTE_32F = 68 };
enum : int { CUDA_R_32F = 0 };  // cudaDataType; the others come from TypeScript

}  // namespace fk
