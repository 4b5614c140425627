// Compiled (not linked) by src/tensor-map-native.test.ts against the real cuda.h where a machine has it: what
// native/cuda_decls.h declares for cuTensorMapEncodeTiled (it cannot be included beside cuda.h: same names) must match
// the driver's (a 128-byte, 64-aligned CUtensorMap; the same parameters, the enums int-sized), and the enum values
// TypeScript passes (src/tensor-map.ts, given as -D defines by the test) must equal cuda.h's.
#include <cuda.h>

#include <type_traits>

static_assert(sizeof(::CUtensorMap) == 128 && alignof(::CUtensorMap) <= 128, "CUtensorMap: cuda_decls.h's is 128 bytes, 128-aligned");
static_assert(sizeof(::CUtensorMapDataType) == sizeof(int) && sizeof(::CUtensorMapSwizzle) == sizeof(int), "enums passed as int");
static_assert(std::is_same<decltype(&::cuTensorMapEncodeTiled),
                           CUresult (*)(::CUtensorMap*, ::CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                                        const cuuint32_t*, const cuuint32_t*, ::CUtensorMapInterleave, ::CUtensorMapSwizzle,
                                        ::CUtensorMapL2promotion, ::CUtensorMapFloatOOBfill)>::value,
              "cuTensorMapEncodeTiled's signature (cuda_decls.h's FkTensorMapEncodeTiled mirrors it with ints for the enums)");
static_assert(FK_DTYPE_BF16 == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 && FK_DTYPE_F16 == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 && FK_DTYPE_F32 == CU_TENSOR_MAP_DATA_TYPE_FLOAT32, "data types");
static_assert(FK_SWIZZLE_128B == CU_TENSOR_MAP_SWIZZLE_128B && FK_SWIZZLE_NONE == CU_TENSOR_MAP_SWIZZLE_NONE, "swizzle");
static_assert(FK_L2_256B == CU_TENSOR_MAP_L2_PROMOTION_L2_256B && FK_L2_NONE == CU_TENSOR_MAP_L2_PROMOTION_NONE, "L2 promotion");
static_assert(FK_OOB_ZEROS == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE && FK_INTERLEAVE_NONE == CU_TENSOR_MAP_INTERLEAVE_NONE, "OOB fill, interleave");
