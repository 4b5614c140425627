// What the TMA labs (attention-fa3, moe-wgmma) share on the host: the driver's cuTensorMapEncodeTiled, looked up
// through the runtime on an sm_90 device, and bf16 3-D tensor maps with the 128-byte swizzle the kernels' wgmma
// descriptors read, as the kernels' FkTensorMap. Include after the kernel file (fk_tma.cuh) and lab_common.cuh (CK,
// LAB_NAME: the prefix of the error lines).
#pragma once
#include <cuda.h>  // CUtensorMap and cuTensorMapEncodeTiled's types (the function itself comes from the runtime)

#include <cstdio>
#include <cstdlib>
#include <cstring>

static_assert(sizeof(CUtensorMap) == sizeof(FkTensorMap), "FkTensorMap mirrors the driver's CUtensorMap");

typedef CUresult (*LabEncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// Device 0's properties into prop and the driver's cuTensorMapEncodeTiled; exits 2, saying why, on a device that is not
// sm_90 or a driver without the function.
static LabEncodeTiled lab_tma_setup(cudaDeviceProp& prop) {
  CK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9) {
    std::fprintf(stderr, LAB_NAME ": %s is sm_%d%d; the kernels are sm_90a\n", prop.name, prop.major, prop.minor);
    std::exit(2);
  }
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult qr;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &qr));
  if (!fn || qr != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, LAB_NAME ": the driver has no cuTensorMapEncodeTiled\n");
    std::exit(2);
  }
  return (LabEncodeTiled)fn;
}

// A bf16 tensor of dims {d0, d1, d2} elements (d0 contiguous; strides of dims 1 and 2 in bytes) as a 3-D map read in
// boxes of box elements, 128-byte swizzle, zeros past the ends; exits 2 when the driver refuses it.
static FkTensorMap lab_tensor_map_3d(LabEncodeTiled encode, const void* base, const cuuint64_t (&dims)[3], const cuuint64_t (&strides)[2],
                                     const cuuint32_t (&box)[3]) {
  CUtensorMap m;
  const cuuint32_t elem[3] = {1, 1, 1};
  const CUresult r = encode(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, LAB_NAME ": cuTensorMapEncodeTiled failed (%d)\n", (int)r);
    std::exit(2);
  }
  FkTensorMap f;
  std::memcpy(&f, &m, sizeof f);
  return f;
}
