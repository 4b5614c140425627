// The cuDNN types, enum values and entry points the conv code uses, declared here so the addon builds without cuDNN's
// headers (nothing cuDNN at link time: every function is dlsym'ed). Values from cuDNN 9's cudnn_graph.h / cudnn_cnn.h;
// native/test/cudnn_decls_check.cc static_asserts each against real headers where a machine has them.
#pragma once
#include <cstddef>
#include <cstdint>

namespace fk_cudnn {

typedef int cudnnStatus_t;
typedef struct cudnnContext* cudnnHandle_t;
typedef struct cudnnTensorStruct* cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct* cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct* cudnnConvolutionDescriptor_t;
typedef void* cudnnBackendDescriptor_t;

struct AlgoPerf {  // cudnnConvolutionFwdAlgoPerf_t and cudnnConvolutionBwdDataAlgoPerf_t (same layout)
  int algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  int determinism;
  int mathType;
  int reserved[3];
};

enum : int { CUDNN_STATUS_SUCCESS = 0, CUDNN_STATUS_NOT_SUPPORTED = 3000 };
enum : int { CUDNN_CROSS_CORRELATION = 1 };                        // cudnnConvolutionMode_t
enum : int { CUDNN_DATA_FLOAT = 0, CUDNN_DATA_HALF = 2, CUDNN_DATA_BFLOAT16 = 9 };  // cudnnDataType_t
enum : int { CUDNN_TENSOR_OP_MATH = 1, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2, CUDNN_FMA_MATH = 3 };

// ---------------------------------------------------------------- backend (graph) API
enum : int {  // cudnnBackendDescriptorType_t
  CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR = 1,
  CUDNN_BACKEND_ENGINE_DESCRIPTOR = 2,
  CUDNN_BACKEND_ENGINECFG_DESCRIPTOR = 3,
  CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR = 4,
  CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR = 5,
  CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR = 7,
  CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR = 10,
  CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR = 12,
  CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR = 15,
  CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR = 16,
  CUDNN_BACKEND_TENSOR_DESCRIPTOR = 17,
};

enum : int {  // cudnnBackendAttributeType_t
  CUDNN_TYPE_HANDLE = 0,
  CUDNN_TYPE_DATA_TYPE = 1,
  CUDNN_TYPE_BOOLEAN = 2,
  CUDNN_TYPE_INT64 = 3,
  CUDNN_TYPE_FLOAT = 4,
  CUDNN_TYPE_VOID_PTR = 6,
  CUDNN_TYPE_CONVOLUTION_MODE = 7,
  CUDNN_TYPE_HEUR_MODE = 8,
  CUDNN_TYPE_KNOB_TYPE = 9,
  CUDNN_TYPE_NUMERICAL_NOTE = 11,
  CUDNN_TYPE_BACKEND_DESCRIPTOR = 15,
};

enum : int {  // cudnnBackendAttributeName_t
  CUDNN_ATTR_CONVOLUTION_COMP_TYPE = 100,
  CUDNN_ATTR_CONVOLUTION_CONV_MODE = 101,
  CUDNN_ATTR_CONVOLUTION_DILATIONS = 102,
  CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES = 103,
  CUDNN_ATTR_CONVOLUTION_POST_PADDINGS = 104,
  CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS = 105,
  CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS = 106,
  CUDNN_ATTR_ENGINEHEUR_MODE = 200,
  CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH = 201,
  CUDNN_ATTR_ENGINEHEUR_RESULTS = 202,
  CUDNN_ATTR_ENGINECFG_ENGINE = 300,
  CUDNN_ATTR_ENGINECFG_KNOB_CHOICES = 302,
  CUDNN_ATTR_EXECUTION_PLAN_HANDLE = 400,
  CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG = 401,
  CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE = 402,
  CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE = 600,
  CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE = 601,
  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA = 700,
  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA = 701,
  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC = 702,
  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W = 703,
  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X = 704,
  CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y = 705,
  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA = 706,
  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA = 707,
  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC = 708,
  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W = 709,
  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX = 710,
  CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY = 711,
  CUDNN_ATTR_OPERATIONGRAPH_HANDLE = 800,
  CUDNN_ATTR_OPERATIONGRAPH_OPS = 801,
  CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT = 900,
  CUDNN_ATTR_TENSOR_DATA_TYPE = 901,
  CUDNN_ATTR_TENSOR_DIMENSIONS = 902,
  CUDNN_ATTR_TENSOR_STRIDES = 903,
  CUDNN_ATTR_TENSOR_UNIQUE_ID = 906,
  CUDNN_ATTR_TENSOR_IS_VIRTUAL = 907,
  CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS = 1000,
  CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS = 1001,
  CUDNN_ATTR_VARIANT_PACK_WORKSPACE = 1003,
  CUDNN_ATTR_ENGINE_GLOBAL_INDEX = 1301,
  CUDNN_ATTR_ENGINE_NUMERICAL_NOTE = 1303,
};

enum : int {  // cudnnBackendNumericalNote_t
  CUDNN_NUMERICAL_NOTE_TENSOR_CORE = 0,
  CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS = 1,
};

enum : int {  // cudnnBackendHeurMode_t
  CUDNN_HEUR_MODE_INSTANT = 0,
  CUDNN_HEUR_MODE_B = 1,
  CUDNN_HEUR_MODE_FALLBACK = 2,
};

// ---------------------------------------------------------------- entry points, in three groups
// Core: needed whichever conv API runs.
#define FK_CUDNN_CORE_FUNCS(X)                                                                                   \
  X(cudnnGetVersion, size_t, ())                                                                               \
  X(cudnnGetErrorString, const char*, (cudnnStatus_t))                                                         \
  X(cudnnCreate, cudnnStatus_t, (cudnnHandle_t*))                                                              \
  X(cudnnSetStream, cudnnStatus_t, (cudnnHandle_t, void*))

// The backend (graph) API: libcudnn_graph, re-exported by the libcudnn.so.9 shim (and by libcudnn.so.8).
#define FK_CUDNN_GRAPH_FUNCS(X)                                                                                  \
  X(cudnnBackendCreateDescriptor, cudnnStatus_t, (int, cudnnBackendDescriptor_t*))                             \
  X(cudnnBackendDestroyDescriptor, cudnnStatus_t, (cudnnBackendDescriptor_t))                                  \
  X(cudnnBackendFinalize, cudnnStatus_t, (cudnnBackendDescriptor_t))                                           \
  X(cudnnBackendSetAttribute, cudnnStatus_t, (cudnnBackendDescriptor_t, int, int, int64_t, const void*))       \
  X(cudnnBackendGetAttribute, cudnnStatus_t, (cudnnBackendDescriptor_t, int, int, int64_t, int64_t*, void*))   \
  X(cudnnBackendExecute, cudnnStatus_t, (cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t))

// The legacy convolution API (deprecated in 9.x): the fallback path.
#define FK_CUDNN_LEGACY_FUNCS(X)                                                                                 \
  X(cudnnCreateTensorDescriptor, cudnnStatus_t, (cudnnTensorDescriptor_t*))                                    \
  X(cudnnSetTensorNdDescriptor, cudnnStatus_t, (cudnnTensorDescriptor_t, int, int, const int*, const int*))    \
  X(cudnnDestroyTensorDescriptor, cudnnStatus_t, (cudnnTensorDescriptor_t))                                    \
  X(cudnnCreateFilterDescriptor, cudnnStatus_t, (cudnnFilterDescriptor_t*))                                    \
  X(cudnnSetFilterNdDescriptor, cudnnStatus_t, (cudnnFilterDescriptor_t, int, int, int, const int*))           \
  X(cudnnDestroyFilterDescriptor, cudnnStatus_t, (cudnnFilterDescriptor_t))                                    \
  X(cudnnCreateConvolutionDescriptor, cudnnStatus_t, (cudnnConvolutionDescriptor_t*))                          \
  X(cudnnSetConvolutionNdDescriptor, cudnnStatus_t,                                                            \
    (cudnnConvolutionDescriptor_t, int, const int*, const int*, const int*, int, int))                         \
  X(cudnnSetConvolutionGroupCount, cudnnStatus_t, (cudnnConvolutionDescriptor_t, int))                         \
  X(cudnnSetConvolutionMathType, cudnnStatus_t, (cudnnConvolutionDescriptor_t, int))                           \
  X(cudnnDestroyConvolutionDescriptor, cudnnStatus_t, (cudnnConvolutionDescriptor_t))                          \
  X(cudnnGetConvolutionForwardAlgorithmMaxCount, cudnnStatus_t, (cudnnHandle_t, int*))                         \
  X(cudnnGetConvolutionForwardAlgorithm_v7, cudnnStatus_t,                                                     \
    (cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t, cudnnConvolutionDescriptor_t,            \
     cudnnTensorDescriptor_t, int, int*, AlgoPerf*))                                                           \
  X(cudnnConvolutionForward, cudnnStatus_t,                                                                    \
    (cudnnHandle_t, const void*, cudnnTensorDescriptor_t, const void*, cudnnFilterDescriptor_t, const void*,   \
     cudnnConvolutionDescriptor_t, int, void*, size_t, const void*, cudnnTensorDescriptor_t, void*))           \
  X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount, cudnnStatus_t, (cudnnHandle_t, int*))                    \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7, cudnnStatus_t,                                                \
    (cudnnHandle_t, cudnnFilterDescriptor_t, cudnnTensorDescriptor_t, cudnnConvolutionDescriptor_t,            \
     cudnnTensorDescriptor_t, int, int*, AlgoPerf*))                                                           \
  X(cudnnConvolutionBackwardData, cudnnStatus_t,                                                               \
    (cudnnHandle_t, const void*, cudnnFilterDescriptor_t, const void*, cudnnTensorDescriptor_t, const void*,   \
     cudnnConvolutionDescriptor_t, int, void*, size_t, const void*, cudnnTensorDescriptor_t, void*))            \
  X(cudnnGetConvolutionForwardWorkspaceSize, cudnnStatus_t,                                                    \
    (cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t, cudnnConvolutionDescriptor_t,            \
     cudnnTensorDescriptor_t, int, size_t*))                                                                   \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize, cudnnStatus_t,                                               \
    (cudnnHandle_t, cudnnFilterDescriptor_t, cudnnTensorDescriptor_t, cudnnConvolutionDescriptor_t,            \
     cudnnTensorDescriptor_t, int, size_t*))                                                                   \
  X(cudnnFindConvolutionForwardAlgorithmEx, cudnnStatus_t,                                                     \
    (cudnnHandle_t, cudnnTensorDescriptor_t, const void*, cudnnFilterDescriptor_t, const void*,                \
     cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, void*, int, int*, AlgoPerf*, void*, size_t))       \
  X(cudnnFindConvolutionBackwardDataAlgorithmEx, cudnnStatus_t,                                                \
    (cudnnHandle_t, cudnnFilterDescriptor_t, const void*, cudnnTensorDescriptor_t, const void*,                \
     cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, void*, int, int*, AlgoPerf*, void*, size_t))

}  // namespace fk_cudnn
