// FastKernels CUDA addon: the CUDA driver API, NVRTC and cuBLASLt, all dlopen'ed at run time.
//
// Conventions:
//  * device pointers and opaque handles cross into JS as plain numbers (x86-64 addresses < 2^48 < 2^53);
//  * every failing CUDA/NVRTC/cuBLASLt call throws the error built by the JS error factory registered with
//    setErrorFactory(), so TypeScript decides the class (CudaError, or CudaFatalError for sticky errors);
//  * the launch path is one N-API call with no arguments: the kernel handle, launch shape, stream and the
//    packed argument bytes live in a staging ArrayBuffer registered once with setLaunchBuffer().
#include <dlfcn.h>

#include <napi.h>

#include <array>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cuda_decls.h"
#include "cudnn.h"

using namespace fk;

namespace {

// ------------------------------------------------------------------------------------------------------------
// Function tables

#define FK_DRIVER_FUNCS(X)                                                                                      \
  X(cuInit, CUresult, (unsigned))                                                                              \
  X(cuDriverGetVersion, CUresult, (int*))                                                                      \
  X(cuGetErrorName, CUresult, (CUresult, const char**))                                                        \
  X(cuGetErrorString, CUresult, (CUresult, const char**))                                                      \
  X(cuDeviceGetCount, CUresult, (int*))                                                                        \
  X(cuDeviceGet, CUresult, (CUdevice*, int))                                                                   \
  X(cuDeviceGetName, CUresult, (char*, int, CUdevice))                                                         \
  X(cuDeviceGetAttribute, CUresult, (int*, int, CUdevice))                                                     \
  X(cuDeviceTotalMem_v2, CUresult, (size_t*, CUdevice))                                                        \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext*, CUdevice))                                                \
  X(cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice))                                                        \
  X(cuCtxSetCurrent, CUresult, (CUcontext))                                                                    \
  X(cuCtxSynchronize, CUresult, ())                                                                            \
  X(cuMemGetInfo_v2, CUresult, (size_t*, size_t*))                                                             \
  X(cuMemAlloc_v2, CUresult, (CUdeviceptr*, size_t))                                                           \
  X(cuMemFree_v2, CUresult, (CUdeviceptr))                                                                     \
  X(cuMemHostAlloc, CUresult, (void**, size_t, unsigned))                                                      \
  X(cuMemFreeHost, CUresult, (void*))                                                                          \
  X(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr, const void*, size_t, CUstream))                              \
  X(cuMemcpyDtoHAsync_v2, CUresult, (void*, CUdeviceptr, size_t, CUstream))                                    \
  X(cuMemcpyDtoDAsync_v2, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                              \
  X(cuMemsetD8Async, CUresult, (CUdeviceptr, unsigned char, size_t, CUstream))                                 \
  X(cuMemsetD16Async, CUresult, (CUdeviceptr, unsigned short, size_t, CUstream))                               \
  X(cuMemsetD32Async, CUresult, (CUdeviceptr, unsigned int, size_t, CUstream))                                 \
  X(cuStreamCreate, CUresult, (CUstream*, unsigned))                                                           \
  X(cuStreamDestroy_v2, CUresult, (CUstream))                                                                  \
  X(cuStreamSynchronize, CUresult, (CUstream))                                                                 \
  X(cuStreamQuery, CUresult, (CUstream))                                                                       \
  X(cuStreamWaitEvent, CUresult, (CUstream, CUevent, unsigned))                                                \
  X(cuEventCreate, CUresult, (CUevent*, unsigned))                                                             \
  X(cuEventDestroy_v2, CUresult, (CUevent))                                                                    \
  X(cuEventRecord, CUresult, (CUevent, CUstream))                                                              \
  X(cuEventSynchronize, CUresult, (CUevent))                                                                   \
  X(cuEventElapsedTime, CUresult, (float*, CUevent, CUevent))                                                  \
  X(cuModuleLoadData, CUresult, (CUmodule*, const void*))                                                      \
  X(cuModuleUnload, CUresult, (CUmodule))                                                                      \
  X(cuModuleGetFunction, CUresult, (CUfunction*, CUmodule, const char*))                                       \
  X(cuFuncSetAttribute, CUresult, (CUfunction, int, int))                                                      \
  X(cuFuncGetAttribute, CUresult, (int*, int, CUfunction))                                                     \
  X(cuLaunchKernel, CUresult,                                                                                  \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, void**)) \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, CUresult, (int*, CUfunction, int, size_t))                    \
  X(cuOccupancyMaxPotentialBlockSize, CUresult, (int*, int*, CUfunction, size_t (*)(int), size_t, int))        \
  X(cuStreamBeginCapture_v2, CUresult, (CUstream, int))                                                        \
  X(cuStreamEndCapture, CUresult, (CUstream, CUgraph*))                                                        \
  X(cuStreamIsCapturing, CUresult, (CUstream, int*))                                                           \
  X(cuGraphInstantiateWithFlags, CUresult, (CUgraphExec*, CUgraph, unsigned long long))                        \
  X(cuGraphLaunch, CUresult, (CUgraphExec, CUstream))                                                          \
  X(cuGraphExecUpdate_v2, CUresult, (CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo*))                      \
  X(cuGraphGetNodes, CUresult, (CUgraph, CUgraphNode*, size_t*))                                               \
  X(cuGraphDestroy, CUresult, (CUgraph))                                                                       \
  X(cuGraphExecDestroy, CUresult, (CUgraphExec))

#define FK_NVRTC_FUNCS(X)                                                                                       \
  X(nvrtcVersion, nvrtcResult, (int*, int*))                                                                   \
  X(nvrtcGetErrorString, const char*, (nvrtcResult))                                                           \
  X(nvrtcCreateProgram, nvrtcResult,                                                                           \
    (nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*))                    \
  X(nvrtcDestroyProgram, nvrtcResult, (nvrtcProgram*))                                                         \
  X(nvrtcCompileProgram, nvrtcResult, (nvrtcProgram, int, const char* const*))                                 \
  X(nvrtcGetProgramLogSize, nvrtcResult, (nvrtcProgram, size_t*))                                              \
  X(nvrtcGetProgramLog, nvrtcResult, (nvrtcProgram, char*))                                                    \
  X(nvrtcGetCUBINSize, nvrtcResult, (nvrtcProgram, size_t*))                                                   \
  X(nvrtcGetCUBIN, nvrtcResult, (nvrtcProgram, char*))                                                         \
  X(nvrtcGetPTXSize, nvrtcResult, (nvrtcProgram, size_t*))                                                     \
  X(nvrtcGetPTX, nvrtcResult, (nvrtcProgram, char*))

#define FK_LT_FUNCS(X)                                                                                          \
  X(cublasLtCreate, cublasStatus_t, (cublasLtHandle_t*))                                                       \
  X(cublasLtDestroy, cublasStatus_t, (cublasLtHandle_t))                                                       \
  X(cublasLtGetVersion, size_t, ())                                                                            \
  X(cublasLtMatmulDescCreate, cublasStatus_t, (cublasLtMatmulDesc_t*, int, int))                               \
  X(cublasLtMatmulDescDestroy, cublasStatus_t, (cublasLtMatmulDesc_t))                                         \
  X(cublasLtMatmulDescSetAttribute, cublasStatus_t, (cublasLtMatmulDesc_t, int, const void*, size_t))          \
  X(cublasLtMatrixLayoutCreate, cublasStatus_t, (cublasLtMatrixLayout_t*, int, uint64_t, uint64_t, int64_t))   \
  X(cublasLtMatrixLayoutDestroy, cublasStatus_t, (cublasLtMatrixLayout_t))                                     \
  X(cublasLtMatrixLayoutSetAttribute, cublasStatus_t, (cublasLtMatrixLayout_t, int, const void*, size_t))      \
  X(cublasLtMatmulPreferenceCreate, cublasStatus_t, (cublasLtMatmulPreference_t*))                             \
  X(cublasLtMatmulPreferenceDestroy, cublasStatus_t, (cublasLtMatmulPreference_t))                             \
  X(cublasLtMatmulPreferenceSetAttribute, cublasStatus_t, (cublasLtMatmulPreference_t, int, const void*, size_t)) \
  X(cublasLtMatmulAlgoGetHeuristic, cublasStatus_t,                                                            \
    (cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,                   \
     cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,                          \
     cublasLtMatmulHeuristicResult_t*, int*))                                                                  \
  X(cublasLtMatmul, cublasStatus_t,                                                                            \
    (cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*, cublasLtMatrixLayout_t, const void*,    \
     cublasLtMatrixLayout_t, const void*, const void*, cublasLtMatrixLayout_t, void*, cublasLtMatrixLayout_t,  \
     const cublasLtMatmulAlgo_t*, void*, size_t, CUstream))

#define FK_DECLARE_PTR(name, ret, args) ret(*name) args = nullptr;
struct Driver {
  FK_DRIVER_FUNCS(FK_DECLARE_PTR)
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;  // optional (CUDA 12+)
  CUresult (*cuGraphGetEdges_v2)(CUgraph, CUgraphNode*, CUgraphNode*, CUgraphEdgeData*, size_t*) = nullptr;  // optional (12.3+)
  // optional: CUDA IPC export of device buffers to the PyTorch candidate worker (ipcHandle below)
  CUresult (*cuMemGetAddressRange_v2)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  CUresult (*cuIpcGetMemHandle)(CUipcMemHandle*, CUdeviceptr) = nullptr;
  // optional (CUDA 12.0+): TMA descriptors for the warp-specialised kernels (tensorMapEncodeTiled below)
  FkTensorMapEncodeTiled cuTensorMapEncodeTiled = nullptr;
};
struct Nvrtc {
  FK_NVRTC_FUNCS(FK_DECLARE_PTR)
};
struct Lt {
  FK_LT_FUNCS(FK_DECLARE_PTR)
  const char* (*cublasLtGetStatusString)(cublasStatus_t) = nullptr;  // optional
  const char* (*cublasLtGetStatusName)(cublasStatus_t) = nullptr;    // optional
};
#undef FK_DECLARE_PTR

Driver cu;
Nvrtc rtc;
Lt lt;
void* cudaLib = nullptr;
void* nvrtcLib = nullptr;
void* ltLib = nullptr;
std::string cudaPath, nvrtcPath, ltPath;
Napi::FunctionReference errorFactory;

// ------------------------------------------------------------------------------------------------------------
// Errors

Napi::Value ThrowLib(Napi::Env env, const char* lib, const char* fn, int code, const std::string& name,
                     const std::string& desc) {
  Napi::Value err;
  if (!errorFactory.IsEmpty()) {
    err = errorFactory.Call({Napi::String::New(env, lib), Napi::String::New(env, fn), Napi::Number::New(env, code),
                             Napi::String::New(env, name), Napi::String::New(env, desc)});
    if (env.IsExceptionPending()) return env.Undefined();
  } else {
    std::string msg = std::string(fn) + " failed: " + name + " (" + std::to_string(code) + "): " + desc;
    err = Napi::Error::New(env, msg).Value();
  }
  Napi::Error(env, err).ThrowAsJavaScriptException();
  return env.Undefined();
}

std::string CuName(CUresult r) {
  const char* s = nullptr;
  if (cu.cuGetErrorName && cu.cuGetErrorName(r, &s) == CUDA_SUCCESS && s) return s;
  return "CUDA_ERROR_" + std::to_string(r);
}
std::string CuString(CUresult r) {
  const char* s = nullptr;
  if (cu.cuGetErrorString && cu.cuGetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
  return "unknown error";
}
Napi::Value ThrowCu(Napi::Env env, CUresult r, const char* fn) {
  return ThrowLib(env, "cuda", fn, r, CuName(r), CuString(r));
}
Napi::Value ThrowLt(Napi::Env env, cublasStatus_t s, const char* fn, const std::string& extra = "") {
  std::string name = lt.cublasLtGetStatusName ? lt.cublasLtGetStatusName(s) : "CUBLAS_STATUS_" + std::to_string(s);
  std::string desc = lt.cublasLtGetStatusString ? lt.cublasLtGetStatusString(s) : "cuBLASLt error";
  if (!extra.empty()) desc += " [" + extra + "]";
  return ThrowLib(env, "cublasLt", fn, s, name, desc);
}
Napi::Value ThrowUsage(Napi::Env env, const std::string& msg) {
  Napi::TypeError::New(env, msg).ThrowAsJavaScriptException();
  return env.Undefined();
}

#define CU(call, fname)                                    \
  do {                                                     \
    CUresult _r = (call);                                  \
    if (_r != CUDA_SUCCESS) return ThrowCu(env, _r, fname); \
  } while (0)

#define NEED(lib, what)                                                                              \
  do {                                                                                               \
    if (!(lib)) return ThrowUsage(env, std::string(what) + " is not loaded: call the loader first"); \
  } while (0)

// ------------------------------------------------------------------------------------------------------------
// Argument helpers

inline double Num(const Napi::CallbackInfo& info, size_t i) { return info[i].As<Napi::Number>().DoubleValue(); }
inline int64_t I64(const Napi::CallbackInfo& info, size_t i) { return static_cast<int64_t>(Num(info, i)); }
inline CUdeviceptr Ptr(const Napi::CallbackInfo& info, size_t i) { return static_cast<CUdeviceptr>(Num(info, i)); }
template <typename H>
inline H Handle(const Napi::CallbackInfo& info, size_t i) {
  return reinterpret_cast<H>(static_cast<uintptr_t>(Num(info, i)));
}
template <typename H>
inline Napi::Number FromHandle(Napi::Env env, H h) {
  return Napi::Number::New(env, static_cast<double>(reinterpret_cast<uintptr_t>(h)));
}

// The bytes of a TypedArray/Buffer argument.
bool BytesOf(const Napi::Value& v, uint8_t** data, size_t* len) {
  if (!v.IsTypedArray()) return false;
  Napi::TypedArray ta = v.As<Napi::TypedArray>();
  Napi::ArrayBuffer ab = ta.ArrayBuffer();
  *data = static_cast<uint8_t*>(ab.Data()) + ta.ByteOffset();
  *len = ta.ByteLength();
  return true;
}

// ------------------------------------------------------------------------------------------------------------
// Library loading

// loadLibrary(kind, candidates[], preload[]) -> { ok, path?, tried: [{path, error}], missing?: [symbols] }
Napi::Value LoadLibrary(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string kind = info[0].As<Napi::String>();
  Napi::Array cands = info[1].As<Napi::Array>();
  Napi::Object out = Napi::Object::New(env);
  Napi::Array tried = Napi::Array::New(env);
  void** slot = kind == "cuda" ? &cudaLib : kind == "nvrtc" ? &nvrtcLib : kind == "cublasLt" ? &ltLib : nullptr;
  std::string* pathSlot = kind == "cuda" ? &cudaPath : kind == "nvrtc" ? &nvrtcPath : &ltPath;
  if (!slot) return ThrowUsage(env, "loadLibrary: unknown library kind '" + kind + "'");
  if (*slot) {
    out.Set("ok", true);
    out.Set("path", *pathSlot);
    out.Set("tried", tried);
    return out;
  }
  if (info.Length() > 2 && info[2].IsArray()) {  // e.g. libnvrtc-builtins next to libnvrtc
    Napi::Array pre = info[2].As<Napi::Array>();
    for (uint32_t i = 0; i < pre.Length(); i++) {
      std::string p = pre.Get(i).As<Napi::String>();
      dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
  }
  uint32_t nTried = 0;
  for (uint32_t i = 0; i < cands.Length(); i++) {
    std::string p = cands.Get(i).As<Napi::String>();
    void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      Napi::Object t = Napi::Object::New(env);
      t.Set("path", p);
      t.Set("error", e ? e : "dlopen failed");
      tried.Set(nTried++, t);
      continue;
    }
    std::vector<std::string> missing;
#define FK_RESOLVE(table, name, ret, args)                                   \
  table.name = reinterpret_cast<ret(*) args>(dlsym(h, #name));               \
  if (!table.name) missing.push_back(#name);
    if (kind == "cuda") {
#define X(name, ret, args) FK_RESOLVE(cu, name, ret, args)
      FK_DRIVER_FUNCS(X)
#undef X
      // optional entries: programmatic dependent launch (CUDA 12+) and edge types of a graph (12.3+)
      cu.cuLaunchKernelEx = reinterpret_cast<CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**)>(dlsym(h, "cuLaunchKernelEx"));
      cu.cuGraphGetEdges_v2 = reinterpret_cast<CUresult (*)(CUgraph, CUgraphNode*, CUgraphNode*, CUgraphEdgeData*, size_t*)>(dlsym(h, "cuGraphGetEdges_v2"));
      // CUDA 12.8+ drivers export the _v2 elapsed-time entry; prefer it when present (same signature).
      if (void* v2 = dlsym(h, "cuEventElapsedTime_v2")) cu.cuEventElapsedTime = reinterpret_cast<CUresult (*)(float*, CUevent, CUevent)>(v2);
      cu.cuMemGetAddressRange_v2 = reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr)>(dlsym(h, "cuMemGetAddressRange_v2"));
      cu.cuIpcGetMemHandle = reinterpret_cast<CUresult (*)(CUipcMemHandle*, CUdeviceptr)>(dlsym(h, "cuIpcGetMemHandle"));
      cu.cuTensorMapEncodeTiled = reinterpret_cast<FkTensorMapEncodeTiled>(dlsym(h, "cuTensorMapEncodeTiled"));
    } else if (kind == "nvrtc") {
#define X(name, ret, args) FK_RESOLVE(rtc, name, ret, args)
      FK_NVRTC_FUNCS(X)
#undef X
    } else {
#define X(name, ret, args) FK_RESOLVE(lt, name, ret, args)
      FK_LT_FUNCS(X)
#undef X
      lt.cublasLtGetStatusString = reinterpret_cast<const char* (*)(cublasStatus_t)>(dlsym(h, "cublasLtGetStatusString"));
      lt.cublasLtGetStatusName = reinterpret_cast<const char* (*)(cublasStatus_t)>(dlsym(h, "cublasLtGetStatusName"));
    }
#undef FK_RESOLVE
    if (!missing.empty()) {
      std::string m = "loaded, but missing symbols:";
      for (auto& s : missing) m += " " + s;
      Napi::Object t = Napi::Object::New(env);
      t.Set("path", p);
      t.Set("error", m);
      tried.Set(nTried++, t);
      dlclose(h);
      if (kind == "cuda") cu = Driver();
      else if (kind == "nvrtc") rtc = Nvrtc();
      else lt = Lt();
      continue;
    }
    *slot = h;
    char resolved[4096] = {0};
    *pathSlot = p;
    // Report the real file behind a bare soname when the loader can tell us.
    Dl_info di;
    void* anySym = kind == "cuda" ? reinterpret_cast<void*>(cu.cuInit)
                   : kind == "nvrtc" ? reinterpret_cast<void*>(rtc.nvrtcVersion)
                                     : reinterpret_cast<void*>(lt.cublasLtCreate);
    if (dladdr(anySym, &di) && di.dli_fname) {
      strncpy(resolved, di.dli_fname, sizeof(resolved) - 1);
      *pathSlot = resolved;
    }
    out.Set("ok", true);
    out.Set("path", *pathSlot);
    out.Set("tried", tried);
    return out;
  }
  out.Set("ok", false);
  out.Set("tried", tried);
  return out;
}

// ------------------------------------------------------------------------------------------------------------
// Driver: init, devices, contexts

Napi::Value SetErrorFactory(const Napi::CallbackInfo& info) {
  errorFactory = Napi::Persistent(info[0].As<Napi::Function>());
  return info.Env().Undefined();
}

// init() -> driver version; throws the driver's error (e.g. CUDA_ERROR_NO_DEVICE) otherwise.
Napi::Value Init(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(cudaLib, "libcuda");
  CU(cu.cuInit(0), "cuInit");
  int v = 0;
  CU(cu.cuDriverGetVersion(&v), "cuDriverGetVersion");
  return Napi::Number::New(env, v);
}

Napi::Value DeviceCount(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(cudaLib, "libcuda");
  int n = 0;
  CU(cu.cuDeviceGetCount(&n), "cuDeviceGetCount");
  return Napi::Number::New(env, n);
}

Napi::Value DeviceProperties(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(cudaLib, "libcuda");
  CUdevice dev;
  CU(cu.cuDeviceGet(&dev, static_cast<int>(Num(info, 0))), "cuDeviceGet");
  char name[256] = {0};
  CU(cu.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
  size_t total = 0;
  CU(cu.cuDeviceTotalMem_v2(&total, dev), "cuDeviceTotalMem");
  Napi::Object o = Napi::Object::New(env);
  o.Set("name", name);
  o.Set("totalMemory", static_cast<double>(total));
  struct A {
    const char* key;
    int attr;
  };
  static const A attrs[] = {
      {"multiprocessors", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
      {"l2CacheBytes", CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE},
      {"major", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
      {"minor", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
      {"sharedPerBlock", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK},
      {"sharedPerBlockOptin", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
      {"sharedPerMultiprocessor", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR},
      {"maxThreadsPerBlock", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
      {"maxThreadsPerMultiprocessor", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR},
      {"registersPerBlock", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK},
      {"warpSize", CU_DEVICE_ATTRIBUTE_WARP_SIZE},
      {"clockRateKHz", CU_DEVICE_ATTRIBUTE_CLOCK_RATE},
      {"memoryClockRateKHz", CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE},
      {"memoryBusWidth", CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH},
      {"pciBusId", CU_DEVICE_ATTRIBUTE_PCI_BUS_ID},
  };
  for (const A& a : attrs) {
    int v = 0;
    CU(cu.cuDeviceGetAttribute(&v, a.attr, dev), "cuDeviceGetAttribute");
    o.Set(a.key, v);
  }
  return o;
}

Napi::Value PrimaryCtxRetain(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(cudaLib, "libcuda");
  CUdevice dev;
  CU(cu.cuDeviceGet(&dev, static_cast<int>(Num(info, 0))), "cuDeviceGet");
  CUcontext ctx = nullptr;
  CU(cu.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  return FromHandle(env, ctx);
}
Napi::Value PrimaryCtxRelease(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CUdevice dev;
  CU(cu.cuDeviceGet(&dev, static_cast<int>(Num(info, 0))), "cuDeviceGet");
  CU(cu.cuDevicePrimaryCtxRelease_v2(dev), "cuDevicePrimaryCtxRelease");
  return env.Undefined();
}
Napi::Value CtxSetCurrent(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuCtxSetCurrent(Handle<CUcontext>(info, 0)), "cuCtxSetCurrent");
  return env.Undefined();
}
Napi::Value CtxSynchronize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuCtxSynchronize(), "cuCtxSynchronize");
  return env.Undefined();
}
Napi::Value MemGetInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t f = 0, t = 0;
  CU(cu.cuMemGetInfo_v2(&f, &t), "cuMemGetInfo");
  Napi::Object o = Napi::Object::New(env);
  o.Set("free", static_cast<double>(f));
  o.Set("total", static_cast<double>(t));
  return o;
}

// ------------------------------------------------------------------------------------------------------------
// Streams and events

Napi::Value StreamCreate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CUstream s = nullptr;
  CU(cu.cuStreamCreate(&s, info.Length() > 0 ? static_cast<unsigned>(Num(info, 0)) : CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  return FromHandle(env, s);
}
Napi::Value StreamDestroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuStreamDestroy_v2(Handle<CUstream>(info, 0)), "cuStreamDestroy");
  return env.Undefined();
}
Napi::Value StreamSynchronize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuStreamSynchronize(Handle<CUstream>(info, 0)), "cuStreamSynchronize");
  return env.Undefined();
}
// streamQuery(s) -> true when all work is done
Napi::Value StreamQuery(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CUresult r = cu.cuStreamQuery(Handle<CUstream>(info, 0));
  if (r == CUDA_ERROR_NOT_READY) return Napi::Boolean::New(env, false);
  if (r != CUDA_SUCCESS) return ThrowCu(env, r, "cuStreamQuery");
  return Napi::Boolean::New(env, true);
}
Napi::Value StreamWaitEvent(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuStreamWaitEvent(Handle<CUstream>(info, 0), Handle<CUevent>(info, 1), 0), "cuStreamWaitEvent");
  return env.Undefined();
}
Napi::Value EventCreate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CUevent e = nullptr;
  CU(cu.cuEventCreate(&e, info.Length() > 0 ? static_cast<unsigned>(Num(info, 0)) : CU_EVENT_DEFAULT), "cuEventCreate");
  return FromHandle(env, e);
}
Napi::Value EventDestroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuEventDestroy_v2(Handle<CUevent>(info, 0)), "cuEventDestroy");
  return env.Undefined();
}
Napi::Value EventRecord(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuEventRecord(Handle<CUevent>(info, 0), Handle<CUstream>(info, 1)), "cuEventRecord");
  return env.Undefined();
}
Napi::Value EventSynchronize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuEventSynchronize(Handle<CUevent>(info, 0)), "cuEventSynchronize");
  return env.Undefined();
}
Napi::Value EventElapsed(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float ms = 0;
  CU(cu.cuEventElapsedTime(&ms, Handle<CUevent>(info, 0), Handle<CUevent>(info, 1)), "cuEventElapsedTime");
  return Napi::Number::New(env, ms);
}

// ------------------------------------------------------------------------------------------------------------
// Memory

Napi::Value MemAlloc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CUdeviceptr p = 0;
  CU(cu.cuMemAlloc_v2(&p, static_cast<size_t>(Num(info, 0))), "cuMemAlloc");
  return Napi::Number::New(env, static_cast<double>(p));
}
// memAllocOrNull(bytes) -> ptr, or null on CUDA_ERROR_OUT_OF_MEMORY (2) so the allocator can free its cache and retry.
Napi::Value MemAllocOrNull(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CUdeviceptr p = 0;
  CUresult r = cu.cuMemAlloc_v2(&p, static_cast<size_t>(Num(info, 0)));
  if (r == 2) return env.Null();
  if (r != CUDA_SUCCESS) return ThrowCu(env, r, "cuMemAlloc");
  return Napi::Number::New(env, static_cast<double>(p));
}
Napi::Value MemFree(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuMemFree_v2(Ptr(info, 0)), "cuMemFree");
  return env.Undefined();
}

// ipcHandle(ptr) -> { handle: hex of the 64-byte CUipcMemHandle, base, size } of the allocation holding ptr, for another
// process (the PyTorch candidate worker) to map with cuIpcOpenMemHandle and read at ptr - base.
Napi::Value IpcHandle(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!cu.cuMemGetAddressRange_v2 || !cu.cuIpcGetMemHandle) return ThrowUsage(env, "ipcHandle: this driver has no cuIpcGetMemHandle / cuMemGetAddressRange_v2");
  CUdeviceptr base = 0;
  size_t size = 0;
  CU(cu.cuMemGetAddressRange_v2(&base, &size, Ptr(info, 0)), "cuMemGetAddressRange");
  CUipcMemHandle h;
  CU(cu.cuIpcGetMemHandle(&h, base), "cuIpcGetMemHandle");
  static const char* digits = "0123456789abcdef";
  std::string hex(2 * sizeof(h.reserved), '0');
  for (size_t i = 0; i < sizeof(h.reserved); i++) {
    unsigned char b = static_cast<unsigned char>(h.reserved[i]);
    hex[2 * i] = digits[b >> 4];
    hex[2 * i + 1] = digits[b & 15];
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("handle", hex);
  out.Set("base", Napi::Number::New(env, static_cast<double>(base)));
  out.Set("size", Napi::Number::New(env, static_cast<double>(size)));
  return out;
}

void FreePinned(Napi::Env, void* data) {
  if (cu.cuMemFreeHost) cu.cuMemFreeHost(data);
}
// memAllocHost(bytes) -> ArrayBuffer over page-locked memory (freed with cuMemFreeHost when collected)
Napi::Value MemAllocHost(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t n = static_cast<size_t>(Num(info, 0));
  void* p = nullptr;
  CU(cu.cuMemHostAlloc(&p, n ? n : 1, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
  return Napi::ArrayBuffer::New(env, p, n, FreePinned);
}

// memcpyHtoD(dst, srcView, bytes, stream, sync)
Napi::Value MemcpyHtoD(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint8_t* data;
  size_t len;
  if (!BytesOf(info[1], &data, &len)) return ThrowUsage(env, "memcpyHtoD: source must be a TypedArray");
  size_t n = static_cast<size_t>(Num(info, 2));
  if (n > len) return ThrowUsage(env, "memcpyHtoD: byte count exceeds the source view");
  CUstream s = Handle<CUstream>(info, 3);
  CU(cu.cuMemcpyHtoDAsync_v2(Ptr(info, 0), data, n, s), "cuMemcpyHtoDAsync");
  if (info[4].ToBoolean()) CU(cu.cuStreamSynchronize(s), "cuStreamSynchronize");
  return env.Undefined();
}
// memcpyDtoH(dstView, src, bytes, stream, sync)
Napi::Value MemcpyDtoH(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint8_t* data;
  size_t len;
  if (!BytesOf(info[0], &data, &len)) return ThrowUsage(env, "memcpyDtoH: destination must be a TypedArray");
  size_t n = static_cast<size_t>(Num(info, 2));
  if (n > len) return ThrowUsage(env, "memcpyDtoH: byte count exceeds the destination view");
  CUstream s = Handle<CUstream>(info, 3);
  CU(cu.cuMemcpyDtoHAsync_v2(data, Ptr(info, 1), n, s), "cuMemcpyDtoHAsync");
  if (info[4].ToBoolean()) CU(cu.cuStreamSynchronize(s), "cuStreamSynchronize");
  return env.Undefined();
}
// memcpyDtoD(dst, src, bytes, stream)
Napi::Value MemcpyDtoD(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuMemcpyDtoDAsync_v2(Ptr(info, 0), Ptr(info, 1), static_cast<size_t>(Num(info, 2)), Handle<CUstream>(info, 3)),
     "cuMemcpyDtoDAsync");
  return env.Undefined();
}
// memset(dst, value, count, elementBytes(1|2|4), stream)
Napi::Value Memset(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CUdeviceptr p = Ptr(info, 0);
  uint32_t v = static_cast<uint32_t>(Num(info, 1));
  size_t n = static_cast<size_t>(Num(info, 2));
  int w = static_cast<int>(Num(info, 3));
  CUstream s = Handle<CUstream>(info, 4);
  if (w == 1) CU(cu.cuMemsetD8Async(p, static_cast<unsigned char>(v), n, s), "cuMemsetD8Async");
  else if (w == 2) CU(cu.cuMemsetD16Async(p, static_cast<unsigned short>(v), n, s), "cuMemsetD16Async");
  else CU(cu.cuMemsetD32Async(p, v, n, s), "cuMemsetD32Async");
  return env.Undefined();
}

// ------------------------------------------------------------------------------------------------------------
// Modules, functions, launch

Napi::Value ModuleLoadData(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint8_t* data;
  size_t len;
  if (!BytesOf(info[0], &data, &len)) return ThrowUsage(env, "moduleLoadData: image must be a Uint8Array");
  // PTX must be NUL-terminated; cubins are self-describing. Copy to add a terminator either way.
  std::vector<uint8_t> img(data, data + len);
  img.push_back(0);
  CUmodule m = nullptr;
  CU(cu.cuModuleLoadData(&m, img.data()), "cuModuleLoadData");
  return FromHandle(env, m);
}
Napi::Value ModuleUnload(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuModuleUnload(Handle<CUmodule>(info, 0)), "cuModuleUnload");
  return env.Undefined();
}
Napi::Value ModuleGetFunction(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string name = info[1].As<Napi::String>();
  CUfunction f = nullptr;
  CUresult r = cu.cuModuleGetFunction(&f, Handle<CUmodule>(info, 0), name.c_str());
  if (r != CUDA_SUCCESS) {
    return ThrowLib(env, "cuda", "cuModuleGetFunction", r, CuName(r),
                    CuString(r) + " (entry '" + name + "': is it declared extern \"C\" __global__?)");
  }
  return FromHandle(env, f);
}
Napi::Value FuncSetAttribute(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuFuncSetAttribute(Handle<CUfunction>(info, 0), static_cast<int>(Num(info, 1)), static_cast<int>(Num(info, 2))),
     "cuFuncSetAttribute");
  return env.Undefined();
}
Napi::Value FuncGetAttribute(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int v = 0;
  CU(cu.cuFuncGetAttribute(&v, static_cast<int>(Num(info, 1)), Handle<CUfunction>(info, 0)), "cuFuncGetAttribute");
  return Napi::Number::New(env, v);
}
// occupancy(func, blockSize, dynamicSharedBytes) -> { activeBlocksPerSM, suggestedBlockSize, minGridSize }
Napi::Value Occupancy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CUfunction f = Handle<CUfunction>(info, 0);
  int block = static_cast<int>(Num(info, 1));
  size_t smem = static_cast<size_t>(Num(info, 2));
  int active = 0, minGrid = 0, suggested = 0;
  CU(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&active, f, block, smem), "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  CU(cu.cuOccupancyMaxPotentialBlockSize(&minGrid, &suggested, f, nullptr, smem, 0), "cuOccupancyMaxPotentialBlockSize");
  Napi::Object o = Napi::Object::New(env);
  o.Set("activeBlocksPerSM", active);
  o.Set("suggestedBlockSize", suggested);
  o.Set("minGridSize", minGrid);
  return o;
}

// Staging buffer layout (shared with src/args.ts):
//   [0, 8)  f64 function handle     [8, 16) f64 stream handle
//   [16, 48) u32 gx gy gz bx by bz sharedBytes argCount
//   [48, 52) u32 launch flags: bit 0 = programmatic dependent launch (the kernel may start before the previous one on
//            the stream ends; it must execute griddepcontrol.wait before reading what that kernel wrote)
//   [64, 64 + 4*kMaxArgs) u32 offset of each argument in the argument area
//   [kArgBase, end) packed argument bytes
constexpr size_t kMaxArgs = 256;
constexpr size_t kArgBase = 64 + 4 * kMaxArgs;
uint8_t* launchBuf = nullptr;
size_t launchLen = 0;
Napi::Reference<Napi::ArrayBuffer> launchRef;
void* paramPtrs[kMaxArgs];

Napi::Value SetLaunchBuffer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::ArrayBuffer ab = info[0].As<Napi::ArrayBuffer>();
  if (ab.ByteLength() < kArgBase + 64) return ThrowUsage(env, "setLaunchBuffer: buffer too small");
  launchRef = Napi::Persistent(ab);
  launchBuf = static_cast<uint8_t*>(ab.Data());
  launchLen = ab.ByteLength();
  Napi::Object o = Napi::Object::New(env);
  o.Set("maxArgs", static_cast<double>(kMaxArgs));
  o.Set("argBase", static_cast<double>(kArgBase));
  return o;
}

Napi::Value Launch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!launchBuf) return ThrowUsage(env, "launch: no staging buffer (setLaunchBuffer)");
  double fh, sh;
  memcpy(&fh, launchBuf, 8);
  memcpy(&sh, launchBuf + 8, 8);
  uint32_t h[8];
  memcpy(h, launchBuf + 16, sizeof(h));
  uint32_t argc = h[7];
  if (argc > kMaxArgs) return ThrowUsage(env, "launch: too many arguments");
  const uint32_t* offs = reinterpret_cast<const uint32_t*>(launchBuf + 64);
  uint8_t* args = launchBuf + kArgBase;
  // a pointer to each argument's bytes: the driver copies each parameter's size from it (a by-value struct such as a
  // 128-byte CUtensorMap too; args.ts aligns it as the kernel declares, 64 bytes in the argument area)
  for (uint32_t i = 0; i < argc; i++) paramPtrs[i] = args + offs[i];
  CUfunction f = reinterpret_cast<CUfunction>(static_cast<uintptr_t>(fh));
  CUstream s = reinterpret_cast<CUstream>(static_cast<uintptr_t>(sh));
  uint32_t flags;
  memcpy(&flags, launchBuf + 48, 4);
  if (flags & 1u) {
    if (!cu.cuLaunchKernelEx) return ThrowUsage(env, "launch: programmatic dependent launch needs cuLaunchKernelEx, which this driver lacks: install a CUDA 12+ driver, or turn PDL off (launch.pdl false in a FASTKERNELS_TUNING file, docs/tuning.md)");
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg{h[0], h[1], h[2], h[3], h[4], h[5], h[6], s, &attr, 1};
    CU(cu.cuLaunchKernelEx(&cfg, f, paramPtrs, nullptr), "cuLaunchKernelEx");
    return env.Undefined();
  }
  CU(cu.cuLaunchKernel(f, h[0], h[1], h[2], h[3], h[4], h[5], h[6], s, paramPtrs, nullptr), "cuLaunchKernel");
  return env.Undefined();
}

// tensorMapEncodeTiled(dataType, address, dims[], stridesBytes[], box[], elementStrides[], interleave, swizzle,
// l2Promotion, oobFill) -> ArrayBuffer of the 128-byte CUtensorMap (cuTensorMapEncodeTiled; rank = dims.length, strides
// of dims 1 .. rank - 1 in bytes). The bytes go to a kernel as a by-value (__grid_constant__) parameter: args.ts's
// TENSOR_MAP_ARG, 64-byte aligned in the argument area. Needs no context (the driver only packs the descriptor).
bool U64Array(const Napi::Value& v, size_t n, cuuint64_t* out) {
  if (!v.IsArray()) return false;
  Napi::Array a = v.As<Napi::Array>();
  if (a.Length() != n) return false;
  for (uint32_t i = 0; i < n; i++) {
    Napi::Value x = a.Get(i);
    if (!x.IsNumber()) return false;
    const double d = x.As<Napi::Number>().DoubleValue();
    if (!(d >= 0) || d > 9007199254740991.0 || d != static_cast<double>(static_cast<cuuint64_t>(d))) return false;
    out[i] = static_cast<cuuint64_t>(d);
  }
  return true;
}
Napi::Value TensorMapEncodeTiled(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(cudaLib, "libcuda");
  if (!cu.cuTensorMapEncodeTiled)
    return ThrowUsage(env, "tensorMapEncodeTiled: the CUDA driver (" + cudaPath + ") has no cuTensorMapEncodeTiled: TMA needs a CUDA 12.0+ driver");
  if (info.Length() != 10) return ThrowUsage(env, "tensorMapEncodeTiled(dataType, address, dims, stridesBytes, box, elementStrides, interleave, swizzle, l2Promotion, oobFill)");
  for (size_t i : {0, 1, 6, 7, 8, 9})
    if (!info[i].IsNumber()) return ThrowUsage(env, "tensorMapEncodeTiled: argument " + std::to_string(i) + " must be a number");
  if (!info[2].IsArray()) return ThrowUsage(env, "tensorMapEncodeTiled: dims must be an array");
  const size_t rank = info[2].As<Napi::Array>().Length();
  if (rank < 1 || rank > 5) return ThrowUsage(env, "tensorMapEncodeTiled: rank " + std::to_string(rank) + " (1 to 5 dims)");
  cuuint64_t dims[5], strides[5], box64[5], elem64[5];
  if (!U64Array(info[2], rank, dims)) return ThrowUsage(env, "tensorMapEncodeTiled: dims must be non-negative integers");
  if (!U64Array(info[3], rank - 1, strides)) return ThrowUsage(env, "tensorMapEncodeTiled: stridesBytes must be rank - 1 non-negative integers");
  if (!U64Array(info[4], rank, box64)) return ThrowUsage(env, "tensorMapEncodeTiled: box must be rank non-negative integers");
  if (!U64Array(info[5], rank, elem64)) return ThrowUsage(env, "tensorMapEncodeTiled: elementStrides must be rank non-negative integers");
  cuuint32_t box[5], elem[5];
  for (size_t i = 0; i < rank; i++) {
    if (box64[i] > 0xffffffffull || elem64[i] > 0xffffffffull) return ThrowUsage(env, "tensorMapEncodeTiled: box and element strides are 32-bit");
    box[i] = static_cast<cuuint32_t>(box64[i]);
    elem[i] = static_cast<cuuint32_t>(elem64[i]);
  }
  CUtensorMap map{};
  void* address = reinterpret_cast<void*>(static_cast<uintptr_t>(Num(info, 1)));
  CU(cu.cuTensorMapEncodeTiled(&map, static_cast<int>(Num(info, 0)), static_cast<cuuint32_t>(rank), address, dims, strides, box, elem,
                               static_cast<int>(Num(info, 6)), static_cast<int>(Num(info, 7)), static_cast<int>(Num(info, 8)), static_cast<int>(Num(info, 9))),
     "cuTensorMapEncodeTiled");
  Napi::ArrayBuffer out = Napi::ArrayBuffer::New(env, sizeof(map));
  memcpy(out.Data(), &map, sizeof(map));
  return out;
}

// ------------------------------------------------------------------------------------------------------------
// Graphs

Napi::Value StreamBeginCapture(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int mode = info.Length() > 1 ? static_cast<int>(Num(info, 1)) : CU_STREAM_CAPTURE_MODE_GLOBAL;
  CU(cu.cuStreamBeginCapture_v2(Handle<CUstream>(info, 0), mode), "cuStreamBeginCapture");
  return env.Undefined();
}
Napi::Value StreamEndCapture(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CUgraph g = nullptr;
  CU(cu.cuStreamEndCapture(Handle<CUstream>(info, 0), &g), "cuStreamEndCapture");
  return FromHandle(env, g);
}
// streamCaptureStatus(s) -> 0 none, 1 active, 2 invalidated
Napi::Value StreamCaptureStatus(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int st = 0;
  CU(cu.cuStreamIsCapturing(Handle<CUstream>(info, 0), &st), "cuStreamIsCapturing");
  return Napi::Number::New(env, st);
}
Napi::Value GraphInstantiate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CUgraphExec e = nullptr;
  CU(cu.cuGraphInstantiateWithFlags(&e, Handle<CUgraph>(info, 0), 0), "cuGraphInstantiate");
  return FromHandle(env, e);
}
Napi::Value GraphLaunch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuGraphLaunch(Handle<CUgraphExec>(info, 0), Handle<CUstream>(info, 1)), "cuGraphLaunch");
  return env.Undefined();
}
// graphExecUpdate(exec, graph) -> true when updated in place, false when the topology changed (re-instantiate)
Napi::Value GraphExecUpdate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CUgraphExecUpdateResultInfo ri;
  memset(&ri, 0, sizeof(ri));
  CUresult r = cu.cuGraphExecUpdate_v2(Handle<CUgraphExec>(info, 0), Handle<CUgraph>(info, 1), &ri);
  if (r == 910 /* CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE */) return Napi::Boolean::New(env, false);
  if (r != CUDA_SUCCESS) return ThrowCu(env, r, "cuGraphExecUpdate");
  return Napi::Boolean::New(env, true);
}
Napi::Value GraphNodeCount(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  size_t n = 0;
  CU(cu.cuGraphGetNodes(Handle<CUgraph>(info, 0), nullptr, &n), "cuGraphGetNodes");
  return Napi::Number::New(env, static_cast<double>(n));
}
// graphEdgeKinds(graph) -> { "<type>/<from port>": count } over the graph's edges ("0/0": full completion; "1/1",
// "1/2": programmatic dependent launch edges), or null where the driver has no cuGraphGetEdges_v2.
Napi::Value GraphEdgeKinds(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!cu.cuGraphGetEdges_v2) return env.Null();
  CUgraph g = Handle<CUgraph>(info, 0);
  size_t n = 0;
  CU(cu.cuGraphGetEdges_v2(g, nullptr, nullptr, nullptr, &n), "cuGraphGetEdges");
  std::vector<CUgraphNode> from(n), to(n);
  std::vector<CUgraphEdgeData> data(n);
  if (n) CU(cu.cuGraphGetEdges_v2(g, from.data(), to.data(), data.data(), &n), "cuGraphGetEdges");
  Napi::Object o = Napi::Object::New(env);
  for (size_t i = 0; i < n; i++) {
    std::string k = std::to_string(data[i].type) + "/" + std::to_string(data[i].from_port);
    o.Set(k, (o.Has(k) ? o.Get(k).As<Napi::Number>().DoubleValue() : 0.0) + 1.0);
  }
  return o;
}
Napi::Value GraphDestroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuGraphDestroy(Handle<CUgraph>(info, 0)), "cuGraphDestroy");
  return env.Undefined();
}
Napi::Value GraphExecDestroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CU(cu.cuGraphExecDestroy(Handle<CUgraphExec>(info, 0)), "cuGraphExecDestroy");
  return env.Undefined();
}

// ------------------------------------------------------------------------------------------------------------
// NVRTC

struct CompileResult {
  bool ok = false;
  nvrtcResult status = 0;
  std::string stage;  // which call failed
  std::string log;
  std::vector<char> cubin;
  std::string ptx;
};

CompileResult DoCompile(const std::string& src, const std::string& name, const std::vector<std::string>& opts,
                        const std::vector<std::string>& hdrNames, const std::vector<std::string>& hdrSrcs, bool wantPtx) {
  CompileResult res;
  nvrtcProgram prog = nullptr;
  std::vector<const char*> hn, hs;
  for (auto& s : hdrNames) hn.push_back(s.c_str());
  for (auto& s : hdrSrcs) hs.push_back(s.c_str());
  res.status = rtc.nvrtcCreateProgram(&prog, src.c_str(), name.c_str(), static_cast<int>(hn.size()),
                                      hs.empty() ? nullptr : hs.data(), hn.empty() ? nullptr : hn.data());
  if (res.status != 0) {
    res.stage = "nvrtcCreateProgram";
    return res;
  }
  std::vector<const char*> o;
  for (auto& s : opts) o.push_back(s.c_str());
  res.status = rtc.nvrtcCompileProgram(prog, static_cast<int>(o.size()), o.empty() ? nullptr : o.data());
  size_t logSize = 0;
  if (rtc.nvrtcGetProgramLogSize(prog, &logSize) == 0 && logSize > 1) {
    res.log.resize(logSize);
    rtc.nvrtcGetProgramLog(prog, &res.log[0]);
    res.log.resize(strlen(res.log.c_str()));
  }
  if (res.status != 0) {
    res.stage = "nvrtcCompileProgram";
    rtc.nvrtcDestroyProgram(&prog);
    return res;
  }
  if (wantPtx) {
    size_t n = 0;
    res.status = rtc.nvrtcGetPTXSize(prog, &n);
    if (res.status == 0) {
      res.ptx.resize(n);
      res.status = rtc.nvrtcGetPTX(prog, &res.ptx[0]);
      res.ptx.resize(strlen(res.ptx.c_str()));
    }
    if (res.status != 0) res.stage = "nvrtcGetPTX";
  } else {
    size_t n = 0;
    res.status = rtc.nvrtcGetCUBINSize(prog, &n);
    if (res.status == 0) {
      res.cubin.resize(n);
      res.status = rtc.nvrtcGetCUBIN(prog, res.cubin.data());
    }
    if (res.status != 0) res.stage = "nvrtcGetCUBIN (is --gpu-architecture a real sm_XX target?)";
  }
  rtc.nvrtcDestroyProgram(&prog);
  res.ok = res.status == 0;
  return res;
}

Napi::Object CompileResultToJs(Napi::Env env, const CompileResult& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("ok", r.ok);
  o.Set("status", r.status);
  o.Set("statusName", rtc.nvrtcGetErrorString ? rtc.nvrtcGetErrorString(r.status) : "");
  o.Set("stage", r.stage);
  o.Set("log", r.log);
  if (!r.cubin.empty()) o.Set("cubin", Napi::Buffer<char>::Copy(env, r.cubin.data(), r.cubin.size()));
  if (!r.ptx.empty()) o.Set("ptx", r.ptx);
  return o;
}

struct CompileArgs {
  std::string src, name;
  std::vector<std::string> opts, hdrNames, hdrSrcs;
  bool wantPtx = false;
};
// (source, name, options[], headerNames[], headerSources[], wantPtx)
CompileArgs ReadCompileArgs(const Napi::CallbackInfo& info) {
  CompileArgs a;
  a.src = info[0].As<Napi::String>();
  a.name = info[1].As<Napi::String>();
  auto readList = [&](size_t i, std::vector<std::string>& out) {
    if (info.Length() <= i || !info[i].IsArray()) return;
    Napi::Array arr = info[i].As<Napi::Array>();
    for (uint32_t k = 0; k < arr.Length(); k++) out.push_back(arr.Get(k).As<Napi::String>());
  };
  readList(2, a.opts);
  readList(3, a.hdrNames);
  readList(4, a.hdrSrcs);
  a.wantPtx = info.Length() > 5 && info[5].ToBoolean();
  return a;
}

Napi::Value NvrtcCompileSync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(nvrtcLib, "NVRTC");
  CompileArgs a = ReadCompileArgs(info);
  return CompileResultToJs(env, DoCompile(a.src, a.name, a.opts, a.hdrNames, a.hdrSrcs, a.wantPtx));
}

class CompileWorker : public Napi::AsyncWorker {
 public:
  CompileWorker(Napi::Env env, CompileArgs args)
      : Napi::AsyncWorker(env, "fastkernels:nvrtc"), deferred_(Napi::Promise::Deferred::New(env)), args_(std::move(args)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    result_ = DoCompile(args_.src, args_.name, args_.opts, args_.hdrNames, args_.hdrSrcs, args_.wantPtx);
  }
  void OnOK() override { deferred_.Resolve(CompileResultToJs(Env(), result_)); }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  CompileArgs args_;
  CompileResult result_;
};

Napi::Value NvrtcCompileAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(nvrtcLib, "NVRTC");
  auto* w = new CompileWorker(env, ReadCompileArgs(info));
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

Napi::Value NvrtcVersion(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(nvrtcLib, "NVRTC");
  int major = 0, minor = 0;
  nvrtcResult r = rtc.nvrtcVersion(&major, &minor);
  if (r != 0) return ThrowLib(env, "nvrtc", "nvrtcVersion", r, rtc.nvrtcGetErrorString(r), "");
  Napi::Array a = Napi::Array::New(env, 2);
  a.Set(0u, major);
  a.Set(1u, minor);
  return a;
}

// ------------------------------------------------------------------------------------------------------------
// cuBLASLt

cublasLtHandle_t ltHandle = nullptr;
constexpr int kKeyLen = 25;
using PlanKey = std::array<int64_t, kKeyLen>;
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
};
std::map<PlanKey, Plan> plans;

void DestroyPlan(Plan& p) {
  if (p.desc) lt.cublasLtMatmulDescDestroy(p.desc);
  if (p.a) lt.cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) lt.cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) lt.cublasLtMatrixLayoutDestroy(p.c);
  if (p.d) lt.cublasLtMatrixLayoutDestroy(p.d);
  p = Plan();
}

std::string KeyString(const PlanKey& k) {
  static const char* names[kKeyLen] = {"transa", "transb", "m", "n", "k", "typeA", "typeB", "typeC", "typeD",
                                       "compute", "lda", "ldb", "ldc", "ldd", "strideA", "strideB", "strideC",
                                       "strideD", "batch", "epilogue", "alignA", "alignB", "alignC", "alignD",
                                       "workspace"};
  std::string s;
  for (int i = 0; i < kKeyLen; i++) s += (i ? " " : "") + std::string(names[i]) + "=" + std::to_string(k[i]);
  return s;
}

Napi::Value LtVersion(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ltLib, "cuBLASLt");
  return Napi::Number::New(env, static_cast<double>(lt.cublasLtGetVersion()));
}

// ltMatmul(params: Float64Array) -- layout documented in src/blaslt.ts (LT_PARAM)
Napi::Value LtMatmul(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ltLib, "cuBLASLt");
  Napi::Float64Array pa = info[0].As<Napi::Float64Array>();
  if (pa.ElementLength() < 34) return ThrowUsage(env, "ltMatmul: parameter block too short");
  const double* p = pa.Data();
  if (!ltHandle) {
    cublasStatus_t s = lt.cublasLtCreate(&ltHandle);
    if (s != 0) return ThrowLt(env, s, "cublasLtCreate");
  }
  PlanKey key;
  for (int i = 0; i < kKeyLen; i++) key[i] = static_cast<int64_t>(p[i]);
  auto it = plans.find(key);
  if (it == plans.end()) {
    Plan plan;
    cublasStatus_t s;
#define LT(call, fname)                                        \
  do {                                                         \
    s = (call);                                                \
    if (s != 0) {                                              \
      DestroyPlan(plan);                                       \
      return ThrowLt(env, s, fname, KeyString(key));           \
    }                                                          \
  } while (0)
    int32_t transa = static_cast<int32_t>(key[0]), transb = static_cast<int32_t>(key[1]);
    uint64_t m = key[2], n = key[3], k = key[4];
    LT(lt.cublasLtMatmulDescCreate(&plan.desc, static_cast<int>(key[9]), CUDA_R_32F), "cublasLtMatmulDescCreate");
    LT(lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)), "cublasLtMatmulDescSetAttribute(TRANSA)");
    LT(lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)), "cublasLtMatmulDescSetAttribute(TRANSB)");
    int32_t epi = static_cast<int32_t>(key[19]);
    LT(lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "cublasLtMatmulDescSetAttribute(EPILOGUE)");
    LT(lt.cublasLtMatrixLayoutCreate(&plan.a, static_cast<int>(key[5]), transa ? k : m, transa ? m : k, key[10]), "cublasLtMatrixLayoutCreate(A)");
    LT(lt.cublasLtMatrixLayoutCreate(&plan.b, static_cast<int>(key[6]), transb ? n : k, transb ? k : n, key[11]), "cublasLtMatrixLayoutCreate(B)");
    LT(lt.cublasLtMatrixLayoutCreate(&plan.c, static_cast<int>(key[7]), m, n, key[12]), "cublasLtMatrixLayoutCreate(C)");
    LT(lt.cublasLtMatrixLayoutCreate(&plan.d, static_cast<int>(key[8]), m, n, key[13]), "cublasLtMatrixLayoutCreate(D)");
    int32_t batch = static_cast<int32_t>(key[18]);
    if (batch > 1) {
      cublasLtMatrixLayout_t ls[4] = {plan.a, plan.b, plan.c, plan.d};
      for (int i = 0; i < 4; i++) {
        int64_t stride = key[14 + i];
        LT(lt.cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)), "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
        LT(lt.cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)), "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    LT(lt.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    uint64_t ws = static_cast<uint64_t>(key[24]);
    s = lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    for (int i = 0; s == 0 && i < 4; i++) {
      uint32_t al = static_cast<uint32_t>(key[20 + i]);
      s = lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i, &al, sizeof(al));
    }
    if (s != 0) {
      lt.cublasLtMatmulPreferenceDestroy(pref);
      DestroyPlan(plan);
      return ThrowLt(env, s, "cublasLtMatmulPreferenceSetAttribute", KeyString(key));
    }
    cublasLtMatmulHeuristicResult_t hr;
    memset(&hr, 0, sizeof(hr));
    int found = 0;
    s = lt.cublasLtMatmulAlgoGetHeuristic(ltHandle, plan.desc, plan.a, plan.b, plan.c, plan.d, pref, 1, &hr, &found);
    lt.cublasLtMatmulPreferenceDestroy(pref);
    if (s == 0 && found == 0) s = 15;  // CUBLAS_STATUS_NOT_SUPPORTED
    if (s != 0) {
      DestroyPlan(plan);
      return ThrowLt(env, s, "cublasLtMatmulAlgoGetHeuristic", "no algorithm for " + KeyString(key));
    }
    plan.algo = hr.algo;
    plan.workspace = hr.workspaceSize;
#undef LT
    it = plans.emplace(key, plan).first;
  }
  Plan& plan = it->second;
  CUdeviceptr A = static_cast<CUdeviceptr>(p[25]), B = static_cast<CUdeviceptr>(p[26]), C = static_cast<CUdeviceptr>(p[27]),
              D = static_cast<CUdeviceptr>(p[28]), bias = static_cast<CUdeviceptr>(p[29]);
  float alpha = static_cast<float>(p[30]), beta = static_cast<float>(p[31]);
  CUdeviceptr ws = static_cast<CUdeviceptr>(p[32]);
  CUstream stream = reinterpret_cast<CUstream>(static_cast<uintptr_t>(p[33]));
  cublasStatus_t s;
  // every bias epilogue (BIAS 4, RELU_BIAS 6, GELU_BIAS 36) carries the BIAS bit and reads the vector
  if ((key[19] & CUBLASLT_EPILOGUE_BIAS) != 0) {
    void* bp = reinterpret_cast<void*>(bias);
    s = lt.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp));
    if (s != 0) return ThrowLt(env, s, "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  s = lt.cublasLtMatmul(ltHandle, plan.desc, &alpha, reinterpret_cast<void*>(A), plan.a, reinterpret_cast<void*>(B), plan.b,
                        &beta, reinterpret_cast<void*>(C), plan.c, reinterpret_cast<void*>(D), plan.d, &plan.algo,
                        reinterpret_cast<void*>(ws), static_cast<size_t>(key[24]), stream);
  if (s != 0) return ThrowLt(env, s, "cublasLtMatmul", KeyString(key));
  return env.Undefined();
}

Napi::Value LtPlanCount(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(plans.size())); }
Napi::Value LtClearPlans(const Napi::CallbackInfo& info) {
  for (auto& kv : plans) DestroyPlan(kv.second);
  plans.clear();
  return info.Env().Undefined();
}

Napi::Value Loaded(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("cuda", cudaLib ? Napi::Value(Napi::String::New(env, cudaPath)) : env.Null());
  o.Set("nvrtc", nvrtcLib ? Napi::Value(Napi::String::New(env, nvrtcPath)) : env.Null());
  o.Set("cublasLt", ltLib ? Napi::Value(Napi::String::New(env, ltPath)) : env.Null());
  return o;
}

Napi::Object InitAddon(Napi::Env env, Napi::Object exports) {
  struct F {
    const char* name;
    Napi::Value (*fn)(const Napi::CallbackInfo&);
  };
  static const F fns[] = {
      {"loadLibrary", LoadLibrary}, {"loaded", Loaded}, {"setErrorFactory", SetErrorFactory}, {"init", Init},
      {"deviceCount", DeviceCount}, {"deviceProperties", DeviceProperties}, {"primaryCtxRetain", PrimaryCtxRetain},
      {"primaryCtxRelease", PrimaryCtxRelease}, {"ctxSetCurrent", CtxSetCurrent}, {"ctxSynchronize", CtxSynchronize},
      {"memGetInfo", MemGetInfo}, {"streamCreate", StreamCreate}, {"streamDestroy", StreamDestroy},
      {"streamSynchronize", StreamSynchronize}, {"streamQuery", StreamQuery}, {"streamWaitEvent", StreamWaitEvent},
      {"eventCreate", EventCreate}, {"eventDestroy", EventDestroy}, {"eventRecord", EventRecord},
      {"eventSynchronize", EventSynchronize}, {"eventElapsed", EventElapsed}, {"memAlloc", MemAlloc},
      {"memAllocOrNull", MemAllocOrNull}, {"memFree", MemFree}, {"memAllocHost", MemAllocHost}, {"ipcHandle", IpcHandle},
      {"memcpyHtoD", MemcpyHtoD}, {"memcpyDtoH", MemcpyDtoH}, {"memcpyDtoD", MemcpyDtoD}, {"memset", Memset},
      {"moduleLoadData", ModuleLoadData}, {"moduleUnload", ModuleUnload}, {"moduleGetFunction", ModuleGetFunction},
      {"funcSetAttribute", FuncSetAttribute}, {"funcGetAttribute", FuncGetAttribute}, {"occupancy", Occupancy},
      {"setLaunchBuffer", SetLaunchBuffer}, {"launch", Launch}, {"tensorMapEncodeTiled", TensorMapEncodeTiled}, {"streamBeginCapture", StreamBeginCapture},
      {"streamEndCapture", StreamEndCapture}, {"streamCaptureStatus", StreamCaptureStatus},
      {"graphInstantiate", GraphInstantiate}, {"graphLaunch", GraphLaunch}, {"graphExecUpdate", GraphExecUpdate},
      {"graphNodeCount", GraphNodeCount}, {"graphEdgeKinds", GraphEdgeKinds}, {"graphDestroy", GraphDestroy}, {"graphExecDestroy", GraphExecDestroy},
      {"nvrtcVersion", NvrtcVersion}, {"nvrtcCompileSync", NvrtcCompileSync}, {"nvrtcCompileAsync", NvrtcCompileAsync},
      {"ltVersion", LtVersion}, {"ltMatmul", LtMatmul}, {"ltPlanCount", LtPlanCount}, {"ltClearPlans", LtClearPlans},
  };
  for (const F& f : fns) exports.Set(f.name, Napi::Function::New(env, f.fn, f.name));
  fk_cudnn::Register(env, exports, ThrowLib);  // cuDNN convs (native/cudnn.cc)
  exports.Set("abiVersion", Napi::Number::New(env, 1));
  return exports;
}

}  // namespace

NODE_API_MODULE(fastkernels_cuda, InitAddon)
