// cuDNN convolutions (conv1d/2d/3d forward, and transposed convs as backward-data), dlopen'ed at first use: loading,
// one handle per device, the plan cache and the dispatch between the two cuDNN APIs.
//
// Why the backend (graph) API first (cudnn_graph.cc): it is the path PyTorch takes (cudnn-frontend, since 1.13), and
// its engines include the NHWC-native kernels the legacy API's algorithm enum never reaches. Measured on an H100 with
// cuDNN 9 from PyTorch's wheel, fp16 channels-last: the legacy API (cudnnGetConvolutionForwardAlgorithm_v7, algo 1
// nearly everywhere; cudnnFind*AlgorithmEx did not help) ran at 0.44x torch geomean, 1x1 convs 8-10x slower
// (ResNet-50 layer1 1x1: 109 us vs 13.6 us). The legacy API (cudnn_legacy.cc) stays as the fallback where the graph
// symbols are missing or no engine takes a shape; cudnnLastPlan says which API and engine ran.
//
// cuDNN 9 splits itself into sub-libraries (libcudnn_graph, _ops, _cnn, _engines_*, _heuristic, _adv) that the
// libcudnn.so.9 shim dlopens by soname; outside the loader's path (PyTorch's nvidia/cudnn/lib) they are not found,
// so the caller lists them and we preload them RTLD_GLOBAL from the same folder first (passes until none loads).
//
// Parameter block of cudnnConv (a Float64Array; src/ops/conv/cudnn-params.ts writes it):
//   [0, kKeyLen)   the plan key: mode, nbDims, dataType, math, groups, device, x dims/strides, w dims/format,
//                  y dims/strides, pad, stride, dilation, workspace limit, algorithm search (0: the heuristics'
//                  first, 1: measure the candidates once, as cudnn.benchmark does), API (0: graph, else legacy;
//                  1: graph only; 2: legacy only)
//   [44, 50)       x, w, y, workspace pointers, workspace bytes, stream
// The addon adds the pointers' alignment to the key. Returns 0 when it ran, the workspace bytes it needs when the
// given workspace is smaller (nothing ran), or -1 when cuDNN declined the shape (cudnnDeclineReason() says why; the
// caller takes the fallback kernel).
#include "cudnn.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "cudnn_api.h"
#include "cudnn_graph.h"
#include "cudnn_legacy.h"

namespace fk_cudnn {

Api dnn;

std::string StatusName(cudnnStatus_t s) {
  const char* n = dnn.cudnnGetErrorString ? dnn.cudnnGetErrorString(s) : nullptr;
  return n ? n : "CUDNN_STATUS_" + std::to_string(s);
}

namespace {
std::string LastError() {
  if (!dnn.cudnnGetLastErrorString) return "";
  char buf[1024] = {0};
  dnn.cudnnGetLastErrorString(buf, sizeof(buf) - 1);
  return buf;
}
}  // namespace

std::string StatusText(cudnnStatus_t s) {
  const std::string e = LastError();
  return StatusName(s) + (e.empty() ? "" : " (" + e + ")");
}

bool IsNotSupported(cudnnStatus_t s) { return s / 1000 == 3 || s == 9; }
bool IsRefusal(cudnnStatus_t s) { return IsNotSupported(s) || s / 1000 == 2 || s == 3; }

Problem Decode(const Key& k) {
  Problem p;
  p.transposed = k[0] != 0;
  p.nb = static_cast<int>(k[1]);
  p.dataType = static_cast<int>(k[2]);
  p.tensorOps = k[3] != 0;
  p.groups = static_cast<int>(k[4]);
  p.device = static_cast<int>(k[5]);
  for (int i = 0; i < p.nb; i++) {
    p.xd[i] = k[6 + i];
    p.xs[i] = k[11 + i];
    p.wd[i] = k[16 + i];
    p.yd[i] = k[22 + i];
    p.ys[i] = k[27 + i];
  }
  p.wChannelsLast = k[21] == 1;
  for (int i = 0; i < p.nb - 2; i++) {
    p.pad[i] = k[32 + i];
    p.stride[i] = k[35 + i];
    p.dil[i] = k[38 + i];
  }
  p.workspaceLimit = static_cast<size_t>(k[41]);
  p.search = k[42] != 0;
  p.api = k[43] == 1 ? ApiChoice::kGraph : k[43] == 2 ? ApiChoice::kLegacy : ApiChoice::kAuto;
  p.xAlign = k[kKeyLen] & 0xff;
  p.wAlign = (k[kKeyLen] >> 8) & 0xff;
  p.yAlign = (k[kKeyLen] >> 16) & 0xff;
  return p;
}

namespace {

void* lib = nullptr;
std::string libPath;
std::vector<void*> preloaded;  // sub-libraries kept open for the process (never closed)
ThrowFn throwLib = nullptr;
std::string declineReason;
std::array<cudnnHandle_t, 64> handles{};

struct Plan {
  Problem pr;
  bool declined = false;
  bool graph = false;  // the graph API runs it (else the legacy API, or nothing when declined)
  GraphPlan g;
  LegacyPlan legacy;
  std::string graphWhy;  // why the graph API does not run it
  std::string reason;    // why neither does (declined)
};
// Never destroyed (a static map would destroy descriptors after cuDNN's own statics at exit); ClearPlans empties it.
std::map<Key, Plan>& Plans() {
  static auto* plans = new std::map<Key, Plan>();
  return *plans;
}
const Plan* lastPlan = nullptr;  // std::map nodes stay put: valid until ClearPlans

Napi::Value Throw(Napi::Env env, cudnnStatus_t s, const std::string& fn) {
  return throwLib(env, "cudnn", fn.c_str(), s, StatusName(s), LastError());
}
Napi::Value Usage(Napi::Env env, const std::string& msg) {
  Napi::TypeError::New(env, msg).ThrowAsJavaScriptException();
  return env.Undefined();
}

void Release(Plan& p) {
  p.g = GraphPlan();
  DestroyLegacyPlan(p.legacy);
}

// The largest power of two up to 16 dividing the address: what the graph's tensors may promise the engines.
int64_t Alignment(uintptr_t a) {
  int64_t al = 1;
  while (al < 16 && a % static_cast<uintptr_t>(al * 2) == 0) al *= 2;
  return al;
}

std::string Join(const std::string& graphWhy, const std::string& legacyWhy) {
  if (graphWhy.empty()) return "legacy API: " + legacyWhy;
  if (legacyWhy.empty()) return "graph API: " + graphWhy;
  return "graph API: " + graphWhy + "; legacy API: " + legacyWhy;
}

// The legacy plan of a key the graph API does not take; false (declined, with the reason) when that fails too.
bool ToLegacy(Plan& p, cudnnHandle_t h, const std::string& graphWhy) {
  p.g = GraphPlan();
  p.graph = false;
  p.graphWhy = graphWhy;
  std::string why;
  if (p.pr.api != ApiChoice::kGraph) {
    if (!dnn.legacy) why = "the legacy convolution API is missing from this cuDNN";
    else if (MakeLegacyPlan(p.pr, h, &p.legacy, &why)) return true;
  }
  p.reason = Join(graphWhy, why);
  p.declined = true;
  return false;
}

Plan MakePlan(const Key& k, cudnnHandle_t h) {
  Plan p;
  p.pr = Decode(k);
  std::string why;
  if (p.pr.api != ApiChoice::kLegacy) {
    if (!dnn.graph) why = "the backend API is missing from this cuDNN";
    else if (MakeGraphPlan(p.pr, h, &p.g, &why)) {
      p.graph = true;
      return p;
    }
  }
  ToLegacy(p, h, why);
  return p;
}

// cudnnLoad(candidates[], preloads[][]) -> { ok, path?, version?, apis?, tried: [{path, error}] }
// preloads[i]: the sub-libraries to load RTLD_GLOBAL before candidates[i] (its folder's libcudnn_*.so.9).
Napi::Value Load(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object out = Napi::Object::New(env);
  Napi::Array tried = Napi::Array::New(env);
  out.Set("tried", tried);
  auto apis = [&]() {
    Napi::Array a = Napi::Array::New(env);
    uint32_t n = 0;
    if (dnn.graph) a.Set(n++, "graph");
    if (dnn.legacy) a.Set(n++, "legacy");
    return a;
  };
  if (lib) {
    out.Set("ok", true);
    out.Set("path", libPath);
    out.Set("version", static_cast<double>(dnn.cudnnGetVersion()));
    out.Set("apis", apis());
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
    // core entries are required; then the graph API, the legacy API or both
    std::string missingCore, missingGraph, missingLegacy;
#define X(name, ret, args) dnn.name = reinterpret_cast<ret(*) args>(dlsym(h, #name));
#define CORE(name, ret, args) X(name, ret, args) if (!dnn.name) missingCore += " " #name;
#define GRAPH(name, ret, args) X(name, ret, args) if (!dnn.name) missingGraph += " " #name;
#define LEGACY(name, ret, args) X(name, ret, args) if (!dnn.name) missingLegacy += " " #name;
    FK_CUDNN_CORE_FUNCS(CORE)
    FK_CUDNN_GRAPH_FUNCS(GRAPH)
    FK_CUDNN_LEGACY_FUNCS(LEGACY)
#undef X
#undef CORE
#undef GRAPH
#undef LEGACY
    dnn.graph = missingGraph.empty();
    dnn.legacy = missingLegacy.empty();
    if (!missingCore.empty() || (!dnn.graph && !dnn.legacy)) {
      fail(p, "loaded, but missing symbols:" + missingCore + missingGraph + missingLegacy);
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
    out.Set("apis", apis());
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

Napi::Value Conv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!lib) return Usage(env, "cuDNN is not loaded: call cudnnLoad first");
  Napi::Float64Array pa = info[0].As<Napi::Float64Array>();
  if (pa.ElementLength() < static_cast<size_t>(kParamLen)) return Usage(env, "cudnnConv: parameter block too short");
  const double* q = pa.Data();
  cudnnStatus_t s;
  cudnnHandle_t h = HandleFor(static_cast<int>(q[5]), &s);
  if (s != CUDNN_STATUS_SUCCESS) {  // e.g. a cuDNN built for another CUDA than the driver: the caller falls back
    declineReason = "cudnnCreate: " + StatusText(s);
    return Napi::Number::New(env, -1);
  }
  auto ptr = [&](int i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(q[i])); };
  Buffers b;
  b.x = ptr(44);
  b.w = ptr(45);
  b.y = ptr(46);
  b.workspace = ptr(47);
  b.workspaceBytes = static_cast<size_t>(q[48]);
  b.stream = ptr(49);
  Key key;
  for (int i = 0; i < kKeyLen; i++) key[i] = static_cast<int64_t>(q[i]);
  key[kKeyLen] = Alignment(reinterpret_cast<uintptr_t>(b.x)) | Alignment(reinterpret_cast<uintptr_t>(b.w)) << 8 |
                 Alignment(reinterpret_cast<uintptr_t>(b.y)) << 16;
  auto& plans = Plans();
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, MakePlan(key, h)).first;
  Plan& p = it->second;
  lastPlan = &p;
  while (!p.declined) {
    const Outcome o = p.graph ? RunGraph(p.g, p.pr, h, b) : RunLegacy(p.legacy, p.pr, h, b);
    if (o.kind == Outcome::kRan) return Napi::Number::New(env, 0);
    if (o.kind == Outcome::kNeedWorkspace) return Napi::Number::New(env, static_cast<double>(o.bytes));
    if (o.kind == Outcome::kError) return Throw(env, o.status, o.what);
    // refused at launch (nothing ran): a graph plan moves to the legacy API, a legacy one declines the key for good
    if (p.graph) {
      if (ToLegacy(p, h, o.what)) continue;
    } else {
      p.reason = Join(p.graphWhy, o.what);
      p.declined = true;
    }
    Release(p);
  }
  declineReason = p.reason;
  return Napi::Number::New(env, -1);
}

Napi::Value DeclineReason(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), declineReason); }

// The plan of the last key cudnnConv ran or declined: which API and engine, what a benchmark reports beside its time.
Napi::Value LastPlan(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!lastPlan) return env.Null();
  const Plan& p = *lastPlan;
  Napi::Object o = Napi::Object::New(env);
  o.Set("api", p.declined ? env.Null() : Napi::Value(Napi::String::New(env, p.graph ? "graph" : "legacy")));
  const EngineConfig* c = p.graph ? CurrentConfig(p.g) : nullptr;
  o.Set("engine", static_cast<double>(c ? c->engine : -1));
  o.Set("engineName", c ? c->tag : p.declined ? std::string() : std::string(LegacyAlgoName(p.pr.transposed, p.legacy.algo)));
  o.Set("algo", p.graph || p.declined ? -1 : p.legacy.algo);
  o.Set("mathType", p.graph || p.declined ? -1 : p.legacy.mathType);
  o.Set("workspace", static_cast<double>(p.graph ? p.g.current.workspace : p.legacy.workspace));
  o.Set("searched", p.graph ? p.g.searched : p.legacy.searched);
  o.Set("timedPlans", p.graph ? p.g.timedPlans : 0);
  o.Set("measuredMs", static_cast<double>(p.graph ? p.g.current.ms : -1.f));
  o.Set("engineConfigs", static_cast<double>(p.g.configs.size()));
  o.Set("graphDeclined", p.graphWhy);
  o.Set("note", p.graph ? (p.g.searchNote.empty() ? p.g.skipped : p.g.searchNote) : std::string());
  o.Set("declined", p.declined);
  return o;
}
Napi::Value PlanCount(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(Plans().size())); }
Napi::Value ClearPlans(const Napi::CallbackInfo& info) {
  for (auto& kv : Plans()) Release(kv.second);
  Plans().clear();
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
