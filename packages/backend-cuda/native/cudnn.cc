// cuDNN convolutions (conv1d/2d/3d forward, and transposed convs as backward-data), dlopen'ed at first use.
//
// Why the legacy convolution API (cudnnConvolutionForward / BackwardData with cudnnGet*Algorithm_v7) and not the
// backend graph API: one call per conv with descriptors cached per shape key, the algorithm chosen by cuDNN's
// heuristics once per key (what PyTorch does with cudnn.benchmark off, its default), and a few dozen entry points
// instead of the graph API's descriptor plumbing. In cuDNN 9 the legacy calls are served by the same engines (the
// shim forwards them to libcudnn_cnn), and the graph API's one extra, fused epilogues, is not what PyTorch's default
// conv path uses either (it adds the bias in a second kernel, as we do). Deprecated in 9.x but present throughout 9.
//
// cuDNN 9 splits itself into sub-libraries (libcudnn_graph, _ops, _cnn, _engines_*, _heuristic, _adv) that the
// libcudnn.so.9 shim dlopens by soname; outside the loader's path (PyTorch's nvidia/cudnn/lib) they are not found,
// so the caller lists them and we preload them RTLD_GLOBAL from the same folder first (passes until none loads).
//
// Parameter block of cudnnConv (a Float64Array; src/ops/conv/cudnn-params.ts writes it):
//   [0, kKeyLen)   the plan key: mode, nbDims, dataType, math, groups, device, x dims/strides, w dims/format,
//                  y dims/strides, pad, stride, dilation, workspace limit, algorithm search (0: the heuristics'
//                  first, 1: measure the candidates once with cudnnFind*AlgorithmEx, as cudnn.benchmark does)
//   [44, 50)       x, w, y, workspace pointers, workspace bytes, stream
// Returns 0 when it ran, the workspace bytes it needs when the given workspace is smaller (nothing ran), or -1 when
// cuDNN declined the shape (cudnnDeclineReason() says why; the caller takes the fallback kernel).
#include "cudnn.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

namespace fk_cudnn {
namespace {

typedef int cudnnStatus_t;
typedef struct cudnnContext* cudnnHandle_t;
typedef struct cudnnTensorStruct* cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct* cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct* cudnnConvolutionDescriptor_t;
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
enum : int { CUDNN_CROSS_CORRELATION = 1, CUDNN_DATA_FLOAT = 0 };
enum : int { CUDNN_TENSOR_OP_MATH = 1, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2, CUDNN_FMA_MATH = 3 };

#define FK_CUDNN_FUNCS(X)                                                                                       \
  X(cudnnGetVersion, size_t, ())                                                                               \
  X(cudnnGetErrorString, const char*, (cudnnStatus_t))                                                         \
  X(cudnnCreate, cudnnStatus_t, (cudnnHandle_t*))                                                              \
  X(cudnnSetStream, cudnnStatus_t, (cudnnHandle_t, void*))                                                     \
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

#define FK_DECLARE_PTR(name, ret, args) ret(*name) args = nullptr;
struct Api {
  FK_CUDNN_FUNCS(FK_DECLARE_PTR)
  void (*cudnnGetLastErrorString)(char*, size_t) = nullptr;  // optional (9.0+)
};
#undef FK_DECLARE_PTR

Api dnn;
void* lib = nullptr;
std::string libPath;
std::vector<void*> preloaded;  // sub-libraries kept open for the process (never closed)
ThrowFn throwLib = nullptr;
std::string declineReason;
std::array<cudnnHandle_t, 64> handles{};

constexpr int kKeyLen = 44;
constexpr size_t kSearchWorkspace = 64u << 20;  // the workspace an algorithm search offers the candidates
constexpr int kParamLen = 50;
using Key = std::array<int64_t, kKeyLen>;
struct Plan {
  bool declined = false;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  int mathType = 0;
  size_t workspace = 0;
  bool searched = false;  // the algorithm was measured (cudnnFind*AlgorithmEx), not only picked by the heuristics
};
std::map<Key, Plan> plans;
const Plan* lastPlan = nullptr;  // std::map nodes stay put: valid until ClearPlans

std::string StatusName(cudnnStatus_t s) {
  const char* n = dnn.cudnnGetErrorString ? dnn.cudnnGetErrorString(s) : nullptr;
  return n ? n : "CUDNN_STATUS_" + std::to_string(s);
}
std::string LastError() {
  if (!dnn.cudnnGetLastErrorString) return "";
  char buf[1024] = {0};
  dnn.cudnnGetLastErrorString(buf, sizeof(buf) - 1);
  return buf;
}
Napi::Value Throw(Napi::Env env, cudnnStatus_t s, const char* fn) {
  return throwLib(env, "cudnn", fn, s, StatusName(s), LastError());
}
Napi::Value Usage(Napi::Env env, const std::string& msg) {
  Napi::TypeError::New(env, msg).ThrowAsJavaScriptException();
  return env.Undefined();
}

void DestroyPlan(Plan& p) {
  if (p.x) dnn.cudnnDestroyTensorDescriptor(p.x);
  if (p.y) dnn.cudnnDestroyTensorDescriptor(p.y);
  if (p.w) dnn.cudnnDestroyFilterDescriptor(p.w);
  if (p.conv) dnn.cudnnDestroyConvolutionDescriptor(p.conv);
  p = Plan();
}

// cudnnLoad(candidates[], preloads[][]) -> { ok, path?, version?, tried: [{path, error}] }
// preloads[i]: the sub-libraries to load RTLD_GLOBAL before candidates[i] (its folder's libcudnn_*.so.9).
Napi::Value Load(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object out = Napi::Object::New(env);
  Napi::Array tried = Napi::Array::New(env);
  out.Set("tried", tried);
  if (lib) {
    out.Set("ok", true);
    out.Set("path", libPath);
    out.Set("version", static_cast<double>(dnn.cudnnGetVersion()));
    return out;
  }
  Napi::Array cands = info[0].As<Napi::Array>();
  Napi::Array pre = info.Length() > 1 && info[1].IsArray() ? info[1].As<Napi::Array>() : Napi::Array::New(env);
  uint32_t nTried = 0;
  auto fail = [&](const std::string& p, const std::string& e) {
    Napi::Object t = Napi::Object::New(env);
    t.Set("path", p);
    t.Set("error", e);
    tried.Set(nTried++, t);
  };
  for (uint32_t i = 0; i < cands.Length(); i++) {
    std::string p = cands.Get(i).As<Napi::String>();
    if (i < pre.Length() && pre.Get(i).IsArray()) {
      Napi::Array subs = pre.Get(i).As<Napi::Array>();
      std::vector<std::string> left;
      for (uint32_t k = 0; k < subs.Length(); k++) left.push_back(subs.Get(k).As<Napi::String>());
      // a sub-library loads once the ones it needs are in: repeat while a pass loads something
      for (bool progress = true; progress && !left.empty();) {
        progress = false;
        for (size_t k = 0; k < left.size();) {
          void* h = dlopen(left[k].c_str(), RTLD_NOW | RTLD_GLOBAL);
          if (h) {
            preloaded.push_back(h);
            left.erase(left.begin() + static_cast<long>(k));
            progress = true;
          } else {
            k++;
          }
        }
      }
    }
    void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      fail(p, e ? e : "dlopen failed");
      continue;
    }
    std::string missing;
#define X(name, ret, args)                                          \
  dnn.name = reinterpret_cast<ret(*) args>(dlsym(h, #name));        \
  if (!dnn.name) missing += " " #name;
    FK_CUDNN_FUNCS(X)
#undef X
    if (!missing.empty()) {
      fail(p, "loaded, but missing symbols:" + missing);
      dlclose(h);
      dnn = Api();
      continue;
    }
    dnn.cudnnGetLastErrorString = reinterpret_cast<void (*)(char*, size_t)>(dlsym(h, "cudnnGetLastErrorString"));
    size_t v = dnn.cudnnGetVersion();
    if (v < 8000) {
      fail(p, "cuDNN " + std::to_string(v) + " is too old (8.0 or newer needed)");
      dlclose(h);
      dnn = Api();
      continue;
    }
    lib = h;
    libPath = p;
    Dl_info di;
    if (dladdr(reinterpret_cast<void*>(dnn.cudnnCreate), &di) && di.dli_fname) libPath = di.dli_fname;
    out.Set("ok", true);
    out.Set("path", libPath);
    out.Set("version", static_cast<double>(v));
    return out;
  }
  out.Set("ok", false);
  return out;
}

Napi::Value Loaded(const Napi::CallbackInfo& info) {
  return lib ? Napi::Value(Napi::String::New(info.Env(), libPath)) : info.Env().Null();
}

Napi::Value Version(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!lib) return Usage(env, "cuDNN is not loaded: call cudnnLoad first");
  return Napi::Number::New(env, static_cast<double>(dnn.cudnnGetVersion()));
}

// The handle of `device` (created on first use: before any graph capture, cudnnCreate allocates).
cudnnHandle_t HandleFor(int device, cudnnStatus_t* s) {
  *s = CUDNN_STATUS_SUCCESS;
  if (device < 0 || device >= static_cast<int>(handles.size())) {
    *s = CUDNN_STATUS_NOT_SUPPORTED;
    return nullptr;
  }
  if (!handles[device]) *s = dnn.cudnnCreate(&handles[device]);
  return handles[device];
}

Napi::Value EnsureHandle(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!lib) return Usage(env, "cuDNN is not loaded: call cudnnLoad first");
  cudnnStatus_t s;
  HandleFor(info[0].As<Napi::Number>().Int32Value(), &s);
  if (s != CUDNN_STATUS_SUCCESS) return Throw(env, s, "cudnnCreate");
  return env.Undefined();
}

// What the chosen algorithm needs: the heuristics' rating can under-state it (grouped / depthwise convs), and
// cudnnConvolutionForward then refuses with BAD_PARAM, so the plan asks the engine itself.
size_t RequiredWorkspace(const Plan& p, cudnnHandle_t h, int mode) {
  size_t bytes = 0;
  const cudnnStatus_t s = mode == 0 ? dnn.cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, p.conv, p.y, p.algo, &bytes)
                                    : dnn.cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w, p.x, p.conv, p.y, p.algo, &bytes);
  return s == CUDNN_STATUS_SUCCESS ? bytes : 0;
}

// Descriptors and the algorithm for one key; a plan cuDNN cannot do is kept as declined (with the reason).
Plan MakePlan(const Key& k, cudnnHandle_t h) {
  Plan p;
  const int mode = static_cast<int>(k[0]), nb = static_cast<int>(k[1]), dt = static_cast<int>(k[2]);
  const bool tensorOps = k[3] != 0;
  int xd[5], xs[5], wd[5], yd[5], ys[5], pad[3], str[3], dil[3];
  for (int i = 0; i < nb; i++) {
    xd[i] = static_cast<int>(k[6 + i]);
    xs[i] = static_cast<int>(k[11 + i]);
    wd[i] = static_cast<int>(k[16 + i]);
    yd[i] = static_cast<int>(k[22 + i]);
    ys[i] = static_cast<int>(k[27 + i]);
  }
  for (int i = 0; i < nb - 2; i++) {
    pad[i] = static_cast<int>(k[32 + i]);
    str[i] = static_cast<int>(k[35 + i]);
    dil[i] = static_cast<int>(k[38 + i]);
  }
  const size_t limit = static_cast<size_t>(k[41]);
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  const char* step = "";
#define STEP(call, name) \
  if (s == CUDNN_STATUS_SUCCESS) { s = (call); step = name; }
  STEP(dnn.cudnnCreateTensorDescriptor(&p.x), "cudnnCreateTensorDescriptor");
  STEP(dnn.cudnnCreateTensorDescriptor(&p.y), "cudnnCreateTensorDescriptor");
  STEP(dnn.cudnnCreateFilterDescriptor(&p.w), "cudnnCreateFilterDescriptor");
  STEP(dnn.cudnnCreateConvolutionDescriptor(&p.conv), "cudnnCreateConvolutionDescriptor");
  STEP(dnn.cudnnSetTensorNdDescriptor(p.x, dt, nb, xd, xs), "cudnnSetTensorNdDescriptor(x)");
  STEP(dnn.cudnnSetTensorNdDescriptor(p.y, dt, nb, yd, ys), "cudnnSetTensorNdDescriptor(y)");
  STEP(dnn.cudnnSetFilterNdDescriptor(p.w, dt, static_cast<int>(k[21]), nb, wd), "cudnnSetFilterNdDescriptor");
  STEP(dnn.cudnnSetConvolutionNdDescriptor(p.conv, nb - 2, pad, str, dil, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
       "cudnnSetConvolutionNdDescriptor");
  STEP(dnn.cudnnSetConvolutionGroupCount(p.conv, static_cast<int>(k[4])), "cudnnSetConvolutionGroupCount");
  STEP(dnn.cudnnSetConvolutionMathType(p.conv, tensorOps ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");
  int maxCount = 0;
  if (mode == 0) STEP(dnn.cudnnGetConvolutionForwardAlgorithmMaxCount(h, &maxCount), "cudnnGetConvolutionForwardAlgorithmMaxCount");
  if (mode == 1) STEP(dnn.cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &maxCount), "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
  std::vector<AlgoPerf> perf(static_cast<size_t>(maxCount > 0 ? maxCount : 1));
  int found = 0;
  if (mode == 0)
    STEP(dnn.cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y, maxCount, &found, perf.data()), "cudnnGetConvolutionForwardAlgorithm_v7");
  if (mode == 1)
    STEP(dnn.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.x, p.conv, p.y, maxCount, &found, perf.data()), "cudnnGetConvolutionBackwardDataAlgorithm_v7");
#undef STEP
  if (s != CUDNN_STATUS_SUCCESS) {
    declineReason = std::string(step) + ": " + StatusName(s) + (LastError().empty() ? "" : " (" + LastError() + ")");
    DestroyPlan(p);
    p.declined = true;
    return p;
  }
  // The heuristics' order, first that works within the workspace limit; exact f32 (TF32 off) skips tensor-op results.
  for (int i = 0; i < found; i++) {
    const AlgoPerf& r = perf[static_cast<size_t>(i)];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > limit) continue;
    if (!tensorOps && dt == CUDNN_DATA_FLOAT && (r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) continue;
    // the math type the algorithm was rated with is the one it runs with (PyTorch sets it the same way)
    if (dnn.cudnnSetConvolutionMathType(p.conv, r.mathType) != CUDNN_STATUS_SUCCESS) continue;
    p.algo = r.algo;
    p.mathType = r.mathType;
    p.workspace = std::max(r.memory, RequiredWorkspace(p, h, mode));
    return p;
  }
  declineReason = "no algorithm among " + std::to_string(found) + " fits (workspace limit " + std::to_string(limit) + " bytes)";
  DestroyPlan(p);
  p.declined = true;
  return p;
}

Napi::Value Conv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!lib) return Usage(env, "cuDNN is not loaded: call cudnnLoad first");
  Napi::Float64Array pa = info[0].As<Napi::Float64Array>();
  if (pa.ElementLength() < static_cast<size_t>(kParamLen)) return Usage(env, "cudnnConv: parameter block too short");
  const double* q = pa.Data();
  cudnnStatus_t s;
  cudnnHandle_t h = HandleFor(static_cast<int>(q[5]), &s);
  if (s != CUDNN_STATUS_SUCCESS) {  // e.g. a cuDNN built for another CUDA than the driver: the caller falls back
    declineReason = "cudnnCreate: " + StatusName(s) + (LastError().empty() ? "" : " (" + LastError() + ")");
    return Napi::Number::New(env, -1);
  }
  Key key;
  for (int i = 0; i < kKeyLen; i++) key[i] = static_cast<int64_t>(q[i]);
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, MakePlan(key, h)).first;
  Plan& p = it->second;
  lastPlan = &p;
  if (p.declined) return Napi::Number::New(env, -1);
  const size_t wsBytes = static_cast<size_t>(q[48]);
  auto ptr = [&](int i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(q[i])); };
  const bool fwd = key[0] == 0;
  if (key[42] != 0 && !p.searched) {
    // measure once, on this call's buffers (y is overwritten, then written by the run below), with a workspace of
    // up to the search size: ask the caller for it first
    const size_t want = std::min(static_cast<size_t>(key[41]), kSearchWorkspace);
    if (wsBytes < want) return Napi::Number::New(env, static_cast<double>(want));
    s = dnn.cudnnSetStream(h, ptr(49));
    if (s != CUDNN_STATUS_SUCCESS) return Throw(env, s, "cudnnSetStream");
    std::array<AlgoPerf, 16> perf{};
    int found = 0;
    s = fwd ? dnn.cudnnFindConvolutionForwardAlgorithmEx(h, p.x, ptr(44), p.w, ptr(45), p.conv, p.y, ptr(46), 16, &found, perf.data(), ptr(47), wsBytes)
            : dnn.cudnnFindConvolutionBackwardDataAlgorithmEx(h, p.w, ptr(45), p.x, ptr(44), p.conv, p.y, ptr(46), 16, &found, perf.data(), ptr(47), wsBytes);
    p.searched = true;  // measured or not, once: a failed search keeps the heuristics' choice
    const bool exactF32 = key[3] == 0 && key[2] == CUDNN_DATA_FLOAT;
    for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < found; i++) {  // sorted by time: the fastest that fits
      const AlgoPerf& r = perf[static_cast<size_t>(i)];
      if (r.status != CUDNN_STATUS_SUCCESS || r.memory > wsBytes) continue;
      if (exactF32 && (r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) continue;
      if (dnn.cudnnSetConvolutionMathType(p.conv, r.mathType) != CUDNN_STATUS_SUCCESS) continue;
      p.algo = r.algo;
      p.mathType = r.mathType;
      p.workspace = std::max(r.memory, RequiredWorkspace(p, h, static_cast<int>(key[0])));
      break;
    }
    dnn.cudnnSetConvolutionMathType(p.conv, p.mathType);
  }
  if (p.workspace > wsBytes) return Napi::Number::New(env, static_cast<double>(p.workspace));
  s = dnn.cudnnSetStream(h, ptr(49));
  if (s != CUDNN_STATUS_SUCCESS) return Throw(env, s, "cudnnSetStream");
  const float one = 1.f, zero = 0.f;  // scaling factors are float for f32 / f16 / bf16 data
  s = fwd ? dnn.cudnnConvolutionForward(h, &one, p.x, ptr(44), p.w, ptr(45), p.conv, p.algo, ptr(47), p.workspace, &zero, p.y, ptr(46))
          : dnn.cudnnConvolutionBackwardData(h, &one, p.w, ptr(45), p.x, ptr(44), p.conv, p.algo, ptr(47), p.workspace, &zero, p.y, ptr(46));
  const char* fn = fwd ? "cudnnConvolutionForward" : "cudnnConvolutionBackwardData";
  if (s / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000) {
    // an algorithm the heuristics offered but the engine refuses at launch (nothing ran): decline the key for good
    declineReason = std::string(fn) + ": " + StatusName(s) + (LastError().empty() ? "" : " (" + LastError() + ")");
    DestroyPlan(p);
    p.declined = true;
    return Napi::Number::New(env, -1);
  }
  if (s != CUDNN_STATUS_SUCCESS) return Throw(env, s, fn);
  return Napi::Number::New(env, 0);
}

Napi::Value DeclineReason(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), declineReason); }
// The plan of the last key cudnnConv ran or declined: what a benchmark reports beside its time.
Napi::Value LastPlan(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  if (!lastPlan) return env.Null();
  o.Set("algo", lastPlan->algo);
  o.Set("mathType", lastPlan->mathType);
  o.Set("workspace", static_cast<double>(lastPlan->workspace));
  o.Set("searched", lastPlan->searched);
  o.Set("declined", lastPlan->declined);
  return o;
}
Napi::Value PlanCount(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(plans.size())); }
Napi::Value ClearPlans(const Napi::CallbackInfo& info) {
  for (auto& kv : plans) DestroyPlan(kv.second);
  plans.clear();
  lastPlan = nullptr;
  return info.Env().Undefined();
}

}  // namespace

void Register(Napi::Env env, Napi::Object exports, ThrowFn thrower) {
  throwLib = thrower;
  struct F {
    const char* name;
    Napi::Value (*fn)(const Napi::CallbackInfo&);
  };
  static const F fns[] = {
      {"cudnnLoad", Load}, {"cudnnLoaded", Loaded}, {"cudnnVersion", Version}, {"cudnnEnsureHandle", EnsureHandle},
      {"cudnnConv", Conv}, {"cudnnDeclineReason", DeclineReason}, {"cudnnPlanCount", PlanCount}, {"cudnnClearPlans", ClearPlans},
      {"cudnnLastPlan", LastPlan},
  };
  for (const F& f : fns) exports.Set(f.name, Napi::Function::New(env, f.fn, f.name));
}

}  // namespace fk_cudnn
