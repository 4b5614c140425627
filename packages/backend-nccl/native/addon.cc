// FastKernels NCCL addon: NCCL (libnccl.so.2) and the few driver calls the waits need, dlopen'ed at run time.
//
// Conventions (as in backend-cuda's addon):
//  * communicators, device pointers and CUDA streams cross into JS as plain numbers (x86-64 addresses < 2^48);
//  * every unexpected NCCL result throws the error built by the JS factory registered with setErrorFactory(),
//    so TypeScript decides the class (NcclError); ncclSuccess and ncclInProgress are returned as numbers;
//  * nothing blocks without a deadline: the wait functions poll cuStreamQuery / ncclCommGetAsyncError with a
//    short sleep and return 'timeout' when the deadline passes (the caller then aborts the communicator).
#include <dlfcn.h>
#include <time.h>

#include <napi.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "nccl_decls.h"

using namespace fkn;

namespace {

#define FK_NCCL_FUNCS(X)                                                                                        \
  X(ncclGetVersion, ncclResult_t, (int*))                                                                      \
  X(ncclGetUniqueId, ncclResult_t, (ncclUniqueId*))                                                            \
  X(ncclCommInitRank, ncclResult_t, (ncclComm_t*, int, ncclUniqueId, int))                                     \
  X(ncclCommDestroy, ncclResult_t, (ncclComm_t))                                                               \
  X(ncclCommAbort, ncclResult_t, (ncclComm_t))                                                                 \
  X(ncclCommGetAsyncError, ncclResult_t, (ncclComm_t, ncclResult_t*))                                          \
  X(ncclCommCount, ncclResult_t, (ncclComm_t, int*))                                                           \
  X(ncclCommCuDevice, ncclResult_t, (ncclComm_t, int*))                                                        \
  X(ncclCommUserRank, ncclResult_t, (ncclComm_t, int*))                                                        \
  X(ncclGetErrorString, const char*, (ncclResult_t))                                                           \
  X(ncclAllReduce, ncclResult_t,                                                                               \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))                       \
  X(ncclBroadcast, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))  \
  X(ncclReduceScatter, ncclResult_t,                                                                           \
    (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))                       \
  X(ncclAllGather, ncclResult_t, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))       \
  X(ncclSend, ncclResult_t, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))              \
  X(ncclRecv, ncclResult_t, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))                    \
  X(ncclGroupStart, ncclResult_t, ())                                                                          \
  X(ncclGroupEnd, ncclResult_t, ())

#define FK_DRIVER_FUNCS(X)                                \
  X(cuStreamQuery, CUresult, (CUstream))                  \
  X(cuGetErrorName, CUresult, (CUresult, const char**))   \
  X(cuGetErrorString, CUresult, (CUresult, const char**)) \
  X(cuCtxGetCurrent, CUresult, (CUcontext*))

#define FK_DECLARE_PTR(name, ret, args) ret(*name) args = nullptr;
struct Nccl {
  FK_NCCL_FUNCS(FK_DECLARE_PTR)
  // Optional (newer NCCLs): the non-blocking config init, finalize and the last error text.
  ncclResult_t (*ncclCommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_v21700*) = nullptr;
  ncclResult_t (*ncclCommFinalize)(ncclComm_t) = nullptr;
  const char* (*ncclGetLastError)(ncclComm_t) = nullptr;
};
struct Driver {
  FK_DRIVER_FUNCS(FK_DECLARE_PTR)
};
#undef FK_DECLARE_PTR

Nccl nc;
Driver cu;
void* ncclLib = nullptr;
void* cudaLib = nullptr;
std::string ncclPath, cudaPath;
Napi::FunctionReference errorFactory;

const char* ResultName(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    case ncclTimeout: return "ncclTimeout";
    default: return "ncclUnknownResult";
  }
}

// ------------------------------------------------------------------------------------------------------------
// Errors

Napi::Value ThrowLib(Napi::Env env, const char* lib, const char* fn, int code, const std::string& name,
                     const std::string& desc, const std::string& last) {
  Napi::Value err;
  if (!errorFactory.IsEmpty()) {
    err = errorFactory.Call({Napi::String::New(env, lib), Napi::String::New(env, fn), Napi::Number::New(env, code),
                             Napi::String::New(env, name), Napi::String::New(env, desc), Napi::String::New(env, last)});
    if (env.IsExceptionPending()) return env.Undefined();
  } else {
    std::string msg = std::string(fn) + " failed: " + name + " (" + std::to_string(code) + "): " + desc;
    if (!last.empty()) msg += " (" + last + ")";
    err = Napi::Error::New(env, msg).Value();
  }
  Napi::Error(env, err).ThrowAsJavaScriptException();
  return env.Undefined();
}

std::string LastError(ncclComm_t comm) {
  if (!nc.ncclGetLastError) return "";
  const char* s = nc.ncclGetLastError(comm);
  return s ? s : "";
}

Napi::Value ThrowNccl(Napi::Env env, ncclResult_t r, const char* fn, ncclComm_t comm) {
  const char* desc = nc.ncclGetErrorString ? nc.ncclGetErrorString(r) : nullptr;
  return ThrowLib(env, "nccl", fn, r, ResultName(r), desc ? desc : "NCCL error", LastError(comm));
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

Napi::Value ThrowUsage(Napi::Env env, const std::string& msg) {
  Napi::TypeError::New(env, msg).ThrowAsJavaScriptException();
  return env.Undefined();
}

#define NEED(lib, what)                                                                              \
  do {                                                                                               \
    if (!(lib)) return ThrowUsage(env, std::string(what) + " is not loaded: call the loader first"); \
  } while (0)

// A call that may return ncclSuccess or (non-blocking communicators) ncclInProgress; anything else throws.
#define NCCL_STATUS(call, fname, comm)                                                \
  do {                                                                                \
    ncclResult_t _r = (call);                                                         \
    if (_r != ncclSuccess && _r != ncclInProgress) return ThrowNccl(env, _r, fname, comm); \
    return Napi::Number::New(env, _r);                                                \
  } while (0)

// ------------------------------------------------------------------------------------------------------------
// Argument helpers

inline double Num(const Napi::CallbackInfo& info, size_t i) { return info[i].As<Napi::Number>().DoubleValue(); }
inline int Int(const Napi::CallbackInfo& info, size_t i) { return info[i].As<Napi::Number>().Int32Value(); }
inline size_t Size(const Napi::CallbackInfo& info, size_t i) { return static_cast<size_t>(Num(info, i)); }
template <typename H>
inline H Handle(const Napi::CallbackInfo& info, size_t i) {
  return reinterpret_cast<H>(static_cast<uintptr_t>(Num(info, i)));
}
template <typename H>
inline Napi::Number FromHandle(Napi::Env env, H h) {
  return Napi::Number::New(env, static_cast<double>(reinterpret_cast<uintptr_t>(h)));
}
inline void* Ptr(const Napi::CallbackInfo& info, size_t i) { return Handle<void*>(info, i); }

bool BytesOf(const Napi::Value& v, uint8_t** data, size_t* len) {
  if (!v.IsTypedArray()) return false;
  Napi::TypedArray ta = v.As<Napi::TypedArray>();
  Napi::ArrayBuffer ab = ta.ArrayBuffer();
  *data = static_cast<uint8_t*>(ab.Data()) + ta.ByteOffset();
  *len = ta.ByteLength();
  return true;
}

double NowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

void SleepUs(double us) {
  if (us <= 0) return;
  timespec ts;
  ts.tv_sec = static_cast<time_t>(us / 1e6);
  ts.tv_nsec = static_cast<long>((us - ts.tv_sec * 1e6) * 1e3);
  nanosleep(&ts, nullptr);
}

// ------------------------------------------------------------------------------------------------------------
// Library loading

// loadLibrary(kind: 'nccl' | 'cuda', candidates[]) -> { ok, path?, tried: [{path, error}] }
Napi::Value LoadLibrary(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string kind = info[0].As<Napi::String>();
  Napi::Array cands = info[1].As<Napi::Array>();
  if (kind != "nccl" && kind != "cuda") return ThrowUsage(env, "loadLibrary: unknown library kind '" + kind + "'");
  void** slot = kind == "nccl" ? &ncclLib : &cudaLib;
  std::string* pathSlot = kind == "nccl" ? &ncclPath : &cudaPath;
  Napi::Object out = Napi::Object::New(env);
  Napi::Array tried = Napi::Array::New(env);
  if (*slot) {
    out.Set("ok", true);
    out.Set("path", *pathSlot);
    out.Set("tried", tried);
    return out;
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
#define FK_RESOLVE(table, name, ret, args)                     \
  table.name = reinterpret_cast<ret(*) args>(dlsym(h, #name)); \
  if (!table.name) missing.push_back(#name);
    void* anySym = nullptr;
    if (kind == "nccl") {
#define X(name, ret, args) FK_RESOLVE(nc, name, ret, args)
      FK_NCCL_FUNCS(X)
#undef X
      nc.ncclCommInitRankConfig = reinterpret_cast<decltype(nc.ncclCommInitRankConfig)>(dlsym(h, "ncclCommInitRankConfig"));
      nc.ncclCommFinalize = reinterpret_cast<decltype(nc.ncclCommFinalize)>(dlsym(h, "ncclCommFinalize"));
      nc.ncclGetLastError = reinterpret_cast<decltype(nc.ncclGetLastError)>(dlsym(h, "ncclGetLastError"));
      anySym = reinterpret_cast<void*>(nc.ncclGetVersion);
    } else {
#define X(name, ret, args) FK_RESOLVE(cu, name, ret, args)
      FK_DRIVER_FUNCS(X)
#undef X
      anySym = reinterpret_cast<void*>(cu.cuStreamQuery);
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
      if (kind == "nccl") nc = Nccl();
      else cu = Driver();
      continue;
    }
    *slot = h;
    *pathSlot = p;
    Dl_info di;  // the real file behind a bare soname
    if (anySym && dladdr(anySym, &di) && di.dli_fname) *pathSlot = di.dli_fname;
    out.Set("ok", true);
    out.Set("path", *pathSlot);
    out.Set("tried", tried);
    return out;
  }
  out.Set("ok", false);
  out.Set("tried", tried);
  return out;
}

Napi::Value Loaded(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("nccl", ncclLib ? Napi::Value(Napi::String::New(env, ncclPath)) : env.Null());
  o.Set("cuda", cudaLib ? Napi::Value(Napi::String::New(env, cudaPath)) : env.Null());
  o.Set("nonBlocking", Napi::Boolean::New(env, nc.ncclCommInitRankConfig != nullptr));
  return o;
}

Napi::Value SetErrorFactory(const Napi::CallbackInfo& info) {
  errorFactory = Napi::Persistent(info[0].As<Napi::Function>());
  return info.Env().Undefined();
}

Napi::Value Version(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  int v = 0;
  ncclResult_t r = nc.ncclGetVersion(&v);
  if (r != ncclSuccess) return ThrowNccl(env, r, "ncclGetVersion", nullptr);
  return Napi::Number::New(env, v);
}

Napi::Value ErrorString(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int code = Int(info, 0);
  const char* s = ncclLib && nc.ncclGetErrorString ? nc.ncclGetErrorString(code) : nullptr;
  Napi::Object o = Napi::Object::New(env);
  o.Set("name", ResultName(code));
  o.Set("description", s ? s : "");
  return o;
}

// hasCurrentContext() -> whether a CUDA context is current on this thread (NCCL needs one).
Napi::Value HasCurrentContext(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(cudaLib, "libcuda");
  CUcontext c = nullptr;
  CUresult r = cu.cuCtxGetCurrent(&c);
  return Napi::Boolean::New(env, r == CUDA_SUCCESS && c != nullptr);
}

// ------------------------------------------------------------------------------------------------------------
// Communicators

// getUniqueId() -> Uint8Array(128)
Napi::Value GetUniqueId(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  ncclResult_t r = nc.ncclGetUniqueId(&id);
  if (r != ncclSuccess) return ThrowNccl(env, r, "ncclGetUniqueId", nullptr);
  Napi::Buffer<uint8_t> b = Napi::Buffer<uint8_t>::Copy(env, reinterpret_cast<uint8_t*>(id.internal), kUniqueIdBytes);
  return b;
}

// commInitRank(nranks, rank, id: Uint8Array(128), blocking: boolean) -> { comm, status }
// Non-blocking (the default): returns at once with status ncclInProgress; poll commGetAsyncError.
Napi::Value CommInitRank(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  int nranks = Int(info, 0);
  int rank = Int(info, 1);
  uint8_t* bytes = nullptr;
  size_t len = 0;
  if (!BytesOf(info[2], &bytes, &len) || len != static_cast<size_t>(kUniqueIdBytes)) {
    return ThrowUsage(env, "commInitRank: the unique id must be a Uint8Array of 128 bytes");
  }
  bool blocking = info.Length() > 3 && info[3].ToBoolean().Value();
  ncclUniqueId id;
  std::memcpy(id.internal, bytes, kUniqueIdBytes);
  ncclComm_t comm = nullptr;
  ncclResult_t r;
  const char* fn;
  if (nc.ncclCommInitRankConfig) {
    ncclConfig_v21700 cfg;
    cfg.size = sizeof(cfg);
    cfg.magic = kConfigMagic;
    cfg.version = kConfigVersion;
    cfg.blocking = blocking ? 1 : 0;
    cfg.cgaClusterSize = kConfigUndefInt;
    cfg.minCTAs = kConfigUndefInt;
    cfg.maxCTAs = kConfigUndefInt;
    cfg.netName = nullptr;
    cfg.splitShare = kConfigUndefInt;
    r = nc.ncclCommInitRankConfig(&comm, nranks, id, rank, &cfg);
    fn = "ncclCommInitRankConfig";
  } else {
    r = nc.ncclCommInitRank(&comm, nranks, id, rank);
    fn = "ncclCommInitRank";
  }
  if (r != ncclSuccess && r != ncclInProgress) {
    std::string last = LastError(comm);
    if (comm) nc.ncclCommAbort(comm);
    const char* desc = nc.ncclGetErrorString ? nc.ncclGetErrorString(r) : nullptr;
    return ThrowLib(env, "nccl", fn, r, ResultName(r), desc ? desc : "NCCL error", last);
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("comm", FromHandle(env, comm));
  o.Set("status", Napi::Number::New(env, r));
  return o;
}

// commGetAsyncError(comm) -> result code (0 ok, 7 in progress, else the error; never throws for NCCL results)
Napi::Value CommGetAsyncError(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclResult_t e = ncclSuccess;
  ncclResult_t r = nc.ncclCommGetAsyncError(Handle<ncclComm_t>(info, 0), &e);
  if (r != ncclSuccess) return Napi::Number::New(env, r);
  return Napi::Number::New(env, e);
}

Napi::Value LastErrorJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!ncclLib) return Napi::String::New(env, "");
  return Napi::String::New(env, LastError(info.Length() > 0 ? Handle<ncclComm_t>(info, 0) : nullptr));
}

// commAbort(comm) -> result code (never throws: abort is the last resort)
Napi::Value CommAbort(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  return Napi::Number::New(env, nc.ncclCommAbort(Handle<ncclComm_t>(info, 0)));
}

Napi::Value CommFinalize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclComm_t comm = Handle<ncclComm_t>(info, 0);
  if (!nc.ncclCommFinalize) return Napi::Number::New(env, ncclSuccess);
  NCCL_STATUS(nc.ncclCommFinalize(comm), "ncclCommFinalize", comm);
}

Napi::Value CommDestroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclComm_t comm = Handle<ncclComm_t>(info, 0);
  NCCL_STATUS(nc.ncclCommDestroy(comm), "ncclCommDestroy", comm);
}

// commInfo(comm) -> { count, device, rank }
Napi::Value CommInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclComm_t comm = Handle<ncclComm_t>(info, 0);
  int count = 0, dev = 0, rank = 0;
  ncclResult_t r;
  if ((r = nc.ncclCommCount(comm, &count)) != ncclSuccess) return ThrowNccl(env, r, "ncclCommCount", comm);
  if ((r = nc.ncclCommCuDevice(comm, &dev)) != ncclSuccess) return ThrowNccl(env, r, "ncclCommCuDevice", comm);
  if ((r = nc.ncclCommUserRank(comm, &rank)) != ncclSuccess) return ThrowNccl(env, r, "ncclCommUserRank", comm);
  Napi::Object o = Napi::Object::New(env);
  o.Set("count", count);
  o.Set("device", dev);
  o.Set("rank", rank);
  return o;
}

// ------------------------------------------------------------------------------------------------------------
// Collectives: (comm, sendPtr, recvPtr, count, dtype, op|root, stream) -> status (0 or 7)

Napi::Value AllReduce(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclComm_t comm = Handle<ncclComm_t>(info, 0);
  NCCL_STATUS(nc.ncclAllReduce(Ptr(info, 1), Ptr(info, 2), Size(info, 3), Int(info, 4), Int(info, 5), comm,
                               Handle<cudaStream_t>(info, 6)),
              "ncclAllReduce", comm);
}

Napi::Value Broadcast(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclComm_t comm = Handle<ncclComm_t>(info, 0);
  NCCL_STATUS(nc.ncclBroadcast(Ptr(info, 1), Ptr(info, 2), Size(info, 3), Int(info, 4), Int(info, 5), comm,
                               Handle<cudaStream_t>(info, 6)),
              "ncclBroadcast", comm);
}

// reduceScatter(comm, send, recv, recvCount, dtype, op, stream)
Napi::Value ReduceScatter(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclComm_t comm = Handle<ncclComm_t>(info, 0);
  NCCL_STATUS(nc.ncclReduceScatter(Ptr(info, 1), Ptr(info, 2), Size(info, 3), Int(info, 4), Int(info, 5), comm,
                                   Handle<cudaStream_t>(info, 6)),
              "ncclReduceScatter", comm);
}

// allGather(comm, send, recv, sendCount, dtype, stream)
Napi::Value AllGather(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclComm_t comm = Handle<ncclComm_t>(info, 0);
  NCCL_STATUS(nc.ncclAllGather(Ptr(info, 1), Ptr(info, 2), Size(info, 3), Int(info, 4), comm,
                               Handle<cudaStream_t>(info, 5)),
              "ncclAllGather", comm);
}

// allToAll(comm, send, recv, countPerPeer, dtype, elementBytes, nranks, stream): ncclSend/ncclRecv to every
// peer in one group; block p of send goes to rank p, block p of recv comes from rank p.
Napi::Value AllToAll(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclComm_t comm = Handle<ncclComm_t>(info, 0);
  char* send = static_cast<char*>(Ptr(info, 1));
  char* recv = static_cast<char*>(Ptr(info, 2));
  size_t count = Size(info, 3);
  ncclDataType_t dt = Int(info, 4);
  size_t es = Size(info, 5);
  int nranks = Int(info, 6);
  cudaStream_t stream = Handle<cudaStream_t>(info, 7);
  size_t block = count * es;
  ncclResult_t r = nc.ncclGroupStart();
  if (r != ncclSuccess) return ThrowNccl(env, r, "ncclGroupStart", comm);
  for (int p = 0; p < nranks; p++) {
    r = nc.ncclSend(send + p * block, count, dt, p, comm, stream);
    if (r != ncclSuccess && r != ncclInProgress) {
      nc.ncclGroupEnd();
      return ThrowNccl(env, r, "ncclSend", comm);
    }
    r = nc.ncclRecv(recv + p * block, count, dt, p, comm, stream);
    if (r != ncclSuccess && r != ncclInProgress) {
      nc.ncclGroupEnd();
      return ThrowNccl(env, r, "ncclRecv", comm);
    }
  }
  NCCL_STATUS(nc.ncclGroupEnd(), "ncclGroupEnd", comm);
}

// send(comm, ptr, count, dtype, peer, stream) / recv(...): for callers that build their own groups.
Napi::Value Send(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclComm_t comm = Handle<ncclComm_t>(info, 0);
  NCCL_STATUS(nc.ncclSend(Ptr(info, 1), Size(info, 2), Int(info, 3), Int(info, 4), comm, Handle<cudaStream_t>(info, 5)),
              "ncclSend", comm);
}
Napi::Value Recv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclComm_t comm = Handle<ncclComm_t>(info, 0);
  NCCL_STATUS(nc.ncclRecv(Ptr(info, 1), Size(info, 2), Int(info, 3), Int(info, 4), comm, Handle<cudaStream_t>(info, 5)),
              "ncclRecv", comm);
}
Napi::Value GroupStart(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  NCCL_STATUS(nc.ncclGroupStart(), "ncclGroupStart", nullptr);
}
Napi::Value GroupEnd(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  NCCL_STATUS(nc.ncclGroupEnd(), "ncclGroupEnd", nullptr);
}

// ------------------------------------------------------------------------------------------------------------
// Waits (bounded): { status: 'done' | 'timeout' | 'nccl' | 'cuda', code, name? }

Napi::Object WaitResult(Napi::Env env, const char* status, int code, const std::string& name = "") {
  Napi::Object o = Napi::Object::New(env);
  o.Set("status", status);
  o.Set("code", code);
  if (!name.empty()) o.Set("name", name);
  return o;
}

// waitStream(comm | 0, stream, timeoutMs, pollUs): until the stream's work is done, the communicator reports
// an error, or the deadline passes.
Napi::Value WaitStream(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(cudaLib, "libcuda");
  ncclComm_t comm = Handle<ncclComm_t>(info, 0);
  CUstream stream = Handle<CUstream>(info, 1);
  double timeoutMs = Num(info, 2);
  double pollUs = info.Length() > 3 ? Num(info, 3) : 20;
  if (comm) NEED(ncclLib, "libnccl");
  double deadline = NowMs() + timeoutMs;
  double sleep = 0;
  for (;;) {
    CUresult q = cu.cuStreamQuery(stream);
    if (q == CUDA_SUCCESS) return WaitResult(env, "done", 0);
    if (q != CUDA_ERROR_NOT_READY) return WaitResult(env, "cuda", q, CuName(q) + ": " + CuString(q));
    if (comm) {
      ncclResult_t e = ncclSuccess;
      ncclResult_t r = nc.ncclCommGetAsyncError(comm, &e);
      if (r != ncclSuccess) e = r;
      if (e != ncclSuccess && e != ncclInProgress) return WaitResult(env, "nccl", e, ResultName(e));
    }
    if (NowMs() >= deadline) return WaitResult(env, "timeout", 0);
    // spin briefly first (short collectives finish in microseconds), then back off to pollUs
    if (sleep < pollUs) sleep = sleep == 0 ? 1 : sleep * 2;
    SleepUs(sleep < pollUs ? sleep : pollUs);
  }
}

// waitComm(comm, timeoutMs, pollUs): until ncclCommGetAsyncError is no longer ncclInProgress.
Napi::Value WaitComm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  NEED(ncclLib, "libnccl");
  ncclComm_t comm = Handle<ncclComm_t>(info, 0);
  double timeoutMs = Num(info, 1);
  double pollUs = info.Length() > 2 ? Num(info, 2) : 50;
  double deadline = NowMs() + timeoutMs;
  double sleep = 0;
  for (;;) {
    ncclResult_t e = ncclSuccess;
    ncclResult_t r = nc.ncclCommGetAsyncError(comm, &e);
    if (r != ncclSuccess) e = r;
    if (e == ncclSuccess) return WaitResult(env, "done", 0);
    if (e != ncclInProgress) return WaitResult(env, "nccl", e, ResultName(e));
    if (NowMs() >= deadline) return WaitResult(env, "timeout", 0);
    // back off from 1 us: a nonblocking enqueue is usually done in tens of microseconds, and a fixed 50 us sleep
    // (longer on a VM) cost ~100 us per collective (H200 x2, run 9)
    if (sleep < pollUs) sleep = sleep == 0 ? 1 : sleep * 2;
    SleepUs(sleep < pollUs ? sleep : pollUs);
  }
}

Napi::Object InitAddon(Napi::Env env, Napi::Object exports) {
  struct F {
    const char* name;
    Napi::Value (*fn)(const Napi::CallbackInfo&);
  };
  static const F fns[] = {
      {"loadLibrary", LoadLibrary},     {"loaded", Loaded},
      {"setErrorFactory", SetErrorFactory}, {"version", Version},
      {"errorString", ErrorString},     {"hasCurrentContext", HasCurrentContext},
      {"getUniqueId", GetUniqueId},     {"commInitRank", CommInitRank},
      {"commGetAsyncError", CommGetAsyncError}, {"lastError", LastErrorJs},
      {"commAbort", CommAbort},         {"commFinalize", CommFinalize},
      {"commDestroy", CommDestroy},     {"commInfo", CommInfo},
      {"allReduce", AllReduce},         {"broadcast", Broadcast},
      {"reduceScatter", ReduceScatter}, {"allGather", AllGather},
      {"allToAll", AllToAll},           {"send", Send},
      {"recv", Recv},                   {"groupStart", GroupStart},
      {"groupEnd", GroupEnd},           {"waitStream", WaitStream},
      {"waitComm", WaitComm},
  };
  for (const F& f : fns) exports.Set(f.name, Napi::Function::New(env, f.fn, f.name));
  exports.Set("abiVersion", Napi::Number::New(env, 1));
  exports.Set("uniqueIdBytes", Napi::Number::New(env, kUniqueIdBytes));
  return exports;
}

}  // namespace

NODE_API_MODULE(fastkernels_nccl, InitAddon)
