// A fake libcudnn for CPU tests of the addon's cuDNN code (src/ops/conv/cudnn-native.test.ts builds it with g++):
// the backend API as a descriptor store that checks what a finalize needs (attribute types and counts, the conv's
// output shape against its input, filter and geometry), heuristics and engines from a scenario, a small legacy API,
// and a JSON-lines log of every call. Nothing runs on a device; pointers are only recorded.
//   FAKE_CUDNN_ENGINES  engines, best first: "id/notes/workspace/flags,..." (notes: t tensor core, d down-convert;
//                       flags: f plan finalize fails, x execute refuses, i instant list only, b fallback list only)
//   FAKE_CUDNN_FAIL     "set:<attr>" or "finalize:<descriptor type>": that call fails with BAD_PARAM
//   FAKE_CUDNN_LOG      the log file (appended)
//   FAKE_CUDNN_STRICT_COUNTS  refuse requests for more numerical notes / knob choices than cuDNN 9.6 has kinds
// Build with -DFAKE_NO_GRAPH or -DFAKE_NO_LEGACY to leave an API's symbols out.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../cudnn_decls.h"

using namespace fk_cudnn;

namespace {

constexpr int BAD_PARAM = 2000, NOT_SUPPORTED = 3000;

struct Engine {
  int64_t id = 0;
  std::vector<int> notes;
  int64_t workspace = 0;
  std::string flags;
};

std::vector<Engine> Engines() {
  std::vector<Engine> out;
  const char* e = getenv("FAKE_CUDNN_ENGINES");
  std::string s = e ? e : "1//0/";
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    Engine g;
    char notes[16] = {0}, flags[16] = {0};
    long long id = 0, ws = 0;
    // id/notes/ws/flags with possibly empty notes and flags
    size_t a = item.find('/'), b = item.find('/', a + 1), c = item.find('/', b + 1);
    id = atoll(item.substr(0, a).c_str());
    snprintf(notes, sizeof(notes), "%s", item.substr(a + 1, b - a - 1).c_str());
    ws = atoll(item.substr(b + 1, c - b - 1).c_str());
    snprintf(flags, sizeof(flags), "%s", c == std::string::npos ? "" : item.substr(c + 1).c_str());
    g.id = id;
    g.workspace = ws;
    g.flags = flags;
    for (const char* n = notes; *n; n++) g.notes.push_back(*n == 't' ? CUDNN_NUMERICAL_NOTE_TENSOR_CORE : CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS);
    out.push_back(g);
  }
  return out;
}

struct Attr {
  int type = 0;
  int64_t n = 0;
  std::vector<char> bytes;
  template <typename T>
  T at(int64_t i) const {
    T v;
    memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return v;
  }
};

struct D {
  int id = 0;
  int kind = 0;
  bool fin = false;
  std::map<int, Attr> a;
  int engine = -1;  // ENGINECFG / ENGINE / EXECUTION_PLAN: index into Engines()
  int knob = 0;     // KNOB_CHOICE: which of the engine's knobs
};

int nextId = 1;
int handleStorage = 0;

size_t ElemSize(int type) {
  switch (type) {
    case CUDNN_TYPE_BOOLEAN: return 1;
    case CUDNN_TYPE_DATA_TYPE: case CUDNN_TYPE_FLOAT: case CUDNN_TYPE_CONVOLUTION_MODE: case CUDNN_TYPE_HEUR_MODE:
    case CUDNN_TYPE_KNOB_TYPE: case CUDNN_TYPE_NUMERICAL_NOTE: return 4;
    default: return 8;
  }
}

void Log(const std::string& line) {
  const char* path = getenv("FAKE_CUDNN_LOG");
  if (!path) return;
  FILE* f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "%s\n", line.c_str());
  fclose(f);
}

std::string Values(const Attr& at) {
  std::string s = "[";
  for (int64_t i = 0; i < at.n; i++) {
    if (i) s += ",";
    switch (at.type) {
      case CUDNN_TYPE_BOOLEAN: s += at.at<bool>(i) ? "true" : "false"; break;
      case CUDNN_TYPE_FLOAT: s += std::to_string(at.at<float>(i)); break;
      case CUDNN_TYPE_DATA_TYPE: case CUDNN_TYPE_CONVOLUTION_MODE: case CUDNN_TYPE_HEUR_MODE: s += std::to_string(at.at<int>(i)); break;
      case CUDNN_TYPE_BACKEND_DESCRIPTOR: {
        D* d = at.at<D*>(i);
        s += std::to_string(d ? d->id : 0);
        break;
      }
      case CUDNN_TYPE_VOID_PTR: case CUDNN_TYPE_HANDLE: s += std::to_string(reinterpret_cast<uintptr_t>(at.at<void*>(i))); break;
      default: s += std::to_string(at.at<int64_t>(i));
    }
  }
  return s + "]";
}

bool FailHere(const char* what, int v) {
  const char* f = getenv("FAKE_CUDNN_FAIL");
  return f && std::string(f) == std::string(what) + ":" + std::to_string(v);
}

// attr present with this type and count (count < 0: any count >= 1)
bool Has(const D* d, int attr, int type, int64_t n) {
  auto it = d->a.find(attr);
  return it != d->a.end() && it->second.type == type && (n < 0 ? it->second.n >= 1 : it->second.n == n);
}
const D* Ref(const D* d, int attr, int kind) {
  if (!Has(d, attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1)) return nullptr;
  const D* r = d->a.at(attr).at<D*>(0);
  return r && r->fin && r->kind == kind ? r : nullptr;
}
std::vector<int64_t> Ints(const D* d, int attr) {
  std::vector<int64_t> v;
  const Attr& at = d->a.at(attr);
  for (int64_t i = 0; i < at.n; i++) v.push_back(at.at<int64_t>(i));
  return v;
}

// The forward conv's output dims from x, w and the convolution: what y (forward) or dy (backward data) must be.
bool ConvShapeOk(const D* x, const D* w, const D* y, const D* conv) {
  auto xd = Ints(x, CUDNN_ATTR_TENSOR_DIMENSIONS), wd = Ints(w, CUDNN_ATTR_TENSOR_DIMENSIONS), yd = Ints(y, CUDNN_ATTR_TENSOR_DIMENSIONS);
  auto pad = Ints(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS), post = Ints(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS);
  auto str = Ints(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES), dil = Ints(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS);
  const size_t nb = xd.size();
  if (wd.size() != nb || yd.size() != nb || pad.size() != nb - 2) return false;
  if (yd[0] != xd[0] || yd[1] != wd[0] || xd[1] % wd[1] != 0 || wd[0] % (xd[1] / wd[1]) != 0) return false;
  for (size_t i = 2; i < nb; i++) {
    const int64_t o = (xd[i] + pad[i - 2] + post[i - 2] - dil[i - 2] * (wd[i] - 1) - 1) / str[i - 2] + 1;
    if (yd[i] != o) return false;
  }
  return true;
}

int FinalizeCheck(const D* d) {
  switch (d->kind) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
      if (!Has(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1) || !Has(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, -1) ||
          !Has(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1) || !Has(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1))
        return BAD_PARAM;
      const int64_t nb = d->a.at(CUDNN_ATTR_TENSOR_DIMENSIONS).n;
      if (!Has(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nb) || nb < 3 || nb > 8) return BAD_PARAM;
      for (int64_t v : Ints(d, CUDNN_ATTR_TENSOR_DIMENSIONS)) if (v < 1) return BAD_PARAM;
      for (int64_t v : Ints(d, CUDNN_ATTR_TENSOR_STRIDES)) if (v < 1) return BAD_PARAM;
      return 0;
    }
    case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: {
      if (!Has(d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1) || !Has(d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1) ||
          !Has(d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1))
        return BAD_PARAM;
      const int64_t sp = d->a.at(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS).at<int64_t>(0);
      for (int attr : {CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES})
        if (!Has(d, attr, CUDNN_TYPE_INT64, sp)) return BAD_PARAM;
      return 0;
    }
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR: {
      const D *x = Ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_BACKEND_TENSOR_DESCRIPTOR), *w = Ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_BACKEND_TENSOR_DESCRIPTOR),
              *y = Ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_BACKEND_TENSOR_DESCRIPTOR), *c = Ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
      if (!x || !w || !y || !c || !Has(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1) || !Has(d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1)) return BAD_PARAM;
      return ConvShapeOk(x, w, y, c) ? 0 : BAD_PARAM;
    }
    case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR: {
      const D *dy = Ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_BACKEND_TENSOR_DESCRIPTOR), *w = Ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_BACKEND_TENSOR_DESCRIPTOR),
              *dx = Ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_BACKEND_TENSOR_DESCRIPTOR), *c = Ref(d, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
      if (!dy || !w || !dx || !c || !Has(d, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1)) return BAD_PARAM;
      return ConvShapeOk(dx, w, dy, c) ? 0 : BAD_PARAM;  // dy = conv(dx)
    }
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
      return Has(d, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1) && Has(d, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1) ? 0 : BAD_PARAM;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
      return Ref(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR) && Has(d, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1) ? 0 : BAD_PARAM;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
      if (!Has(d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1) || !Has(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1)) return BAD_PARAM;
      const D* cfg = d->a.at(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG).at<D*>(0);
      if (!cfg || cfg->kind != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR || cfg->engine < 0) return BAD_PARAM;
      return Engines()[static_cast<size_t>(cfg->engine)].flags.find('f') != std::string::npos ? NOT_SUPPORTED : 0;
    }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
      if (!Has(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, -1) || !Has(d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1)) return BAD_PARAM;
      return Has(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, d->a.at(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS).n) ? 0 : BAD_PARAM;
    }
    default:
      return BAD_PARAM;  // engine configs, engines and knob choices are filled by cuDNN, never finalized by the caller
  }
}

}  // namespace

extern "C" {

size_t cudnnGetVersion() { return 90600; }
const char* cudnnGetErrorString(cudnnStatus_t s) {
  return s == 0 ? "CUDNN_STATUS_SUCCESS" : s == BAD_PARAM ? "CUDNN_STATUS_BAD_PARAM" : s == NOT_SUPPORTED ? "CUDNN_STATUS_NOT_SUPPORTED" : "CUDNN_STATUS_OTHER";
}
void cudnnGetLastErrorString(char* buf, size_t n) { snprintf(buf, n, "%s", ""); }
cudnnStatus_t cudnnCreate(cudnnHandle_t* h) {
  *h = reinterpret_cast<cudnnHandle_t>(&handleStorage);
  return 0;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t, void* s) {
  Log("{\"op\":\"setStream\",\"stream\":" + std::to_string(reinterpret_cast<uintptr_t>(s)) + "}");
  return 0;
}

#ifndef FAKE_NO_GRAPH
cudnnStatus_t cudnnBackendCreateDescriptor(int kind, cudnnBackendDescriptor_t* out) {
  D* d = new D();
  d->id = nextId++;
  d->kind = kind;
  *out = d;
  Log("{\"op\":\"create\",\"d\":" + std::to_string(d->id) + ",\"kind\":" + std::to_string(kind) + "}");
  return 0;
}
cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t p) {
  D* d = static_cast<D*>(p);
  Log("{\"op\":\"destroy\",\"d\":" + std::to_string(d->id) + "}");
  delete d;
  return 0;
}
cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t p) {
  D* d = static_cast<D*>(p);
  int s = d->fin ? BAD_PARAM : FinalizeCheck(d);
  if (FailHere("finalize", d->kind)) s = BAD_PARAM;
  if (s == 0 && d->kind == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) d->engine = d->a.at(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG).at<D*>(0)->engine;
  d->fin = s == 0;
  Log("{\"op\":\"finalize\",\"d\":" + std::to_string(d->id) + ",\"kind\":" + std::to_string(d->kind) + ",\"status\":" + std::to_string(s) + "}");
  return s;
}
cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t p, int name, int type, int64_t n, const void* v) {
  D* d = static_cast<D*>(p);
  if (d->fin || n < 0 || (n > 0 && !v) || FailHere("set", name)) return BAD_PARAM;
  Attr at;
  at.type = type;
  at.n = n;
  at.bytes.assign(static_cast<const char*>(v), static_cast<const char*>(v) + n * ElemSize(type));
  d->a[name] = at;
  Log("{\"op\":\"set\",\"d\":" + std::to_string(d->id) + ",\"kind\":" + std::to_string(d->kind) + ",\"attr\":" + std::to_string(name) +
      ",\"type\":" + std::to_string(type) + ",\"v\":" + Values(at) + "}");
  return 0;
}
cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t p, int name, int type, int64_t n, int64_t* got, void* v) {
  D* d = static_cast<D*>(p);
  const std::vector<Engine> engines = Engines();
  if (name == CUDNN_ATTR_ENGINEHEUR_RESULTS) {
    if (!d->fin || type != CUDNN_TYPE_BACKEND_DESCRIPTOR) return BAD_PARAM;
    const int mode = d->a.at(CUDNN_ATTR_ENGINEHEUR_MODE).at<int>(0);
    std::vector<int> list;
    for (size_t i = 0; i < engines.size(); i++) {
      const std::string& f = engines[i].flags;
      if (mode == CUDNN_HEUR_MODE_FALLBACK ? f.find('i') == std::string::npos : f.find('b') == std::string::npos) list.push_back(static_cast<int>(i));
    }
    if (n == 0) {
      *got = static_cast<int64_t>(list.size());
      return 0;
    }
    int64_t k = 0;
    for (; k < n && k < static_cast<int64_t>(list.size()); k++) {
      D* cfg = static_cast<D**>(v)[k];
      if (!cfg || cfg->kind != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR) return BAD_PARAM;
      cfg->engine = list[static_cast<size_t>(k)];
    }
    *got = k;
    return 0;
  }
  if (d->engine < 0 || n < 1) return BAD_PARAM;
  const Engine& e = engines[static_cast<size_t>(d->engine)];
  switch (name) {
    case CUDNN_ATTR_ENGINECFG_ENGINE: {
      D* eng = static_cast<D**>(v)[0];
      if (d->kind != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR || !eng || eng->kind != CUDNN_BACKEND_ENGINE_DESCRIPTOR) return BAD_PARAM;
      eng->engine = d->engine;
      *got = 1;
      return 0;
    }
    case CUDNN_ATTR_ENGINE_GLOBAL_INDEX:
      if (d->kind != CUDNN_BACKEND_ENGINE_DESCRIPTOR || type != CUDNN_TYPE_INT64) return BAD_PARAM;
      *static_cast<int64_t*>(v) = e.id;
      *got = 1;
      return 0;
    case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE:
      if (d->kind != CUDNN_BACKEND_ENGINE_DESCRIPTOR || type != CUDNN_TYPE_NUMERICAL_NOTE) return BAD_PARAM;
      if (getenv("FAKE_CUDNN_STRICT_COUNTS") && n > 10) return BAD_PARAM;
      *got = std::min<int64_t>(n, static_cast<int64_t>(e.notes.size()));
      for (int64_t i = 0; i < *got; i++) static_cast<int*>(v)[i] = e.notes[static_cast<size_t>(i)];
      return 0;
    case CUDNN_ATTR_ENGINECFG_KNOB_CHOICES: {  // two knobs: tile size id % 7, stages 3
      if (d->kind != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR || type != CUDNN_TYPE_BACKEND_DESCRIPTOR) return BAD_PARAM;
      if (getenv("FAKE_CUDNN_STRICT_COUNTS") && n > 37) return BAD_PARAM;
      *got = std::min<int64_t>(n, 2);
      for (int64_t i = 0; i < *got; i++) {
        D* k = static_cast<D**>(v)[i];
        k->engine = d->engine;
        k->knob = static_cast<int>(i);
      }
      return 0;
    }
    case CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE:
      if (type != CUDNN_TYPE_KNOB_TYPE) return BAD_PARAM;
      *static_cast<int*>(v) = d->knob == 0 ? 2 : 14;
      return 0;
    case CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE:
      if (type != CUDNN_TYPE_INT64) return BAD_PARAM;
      *static_cast<int64_t*>(v) = d->knob == 0 ? e.id % 7 : 3;
      return 0;
    case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE:
      if (!d->fin || type != CUDNN_TYPE_INT64) return BAD_PARAM;
      *static_cast<int64_t*>(v) = e.workspace;
      *got = 1;
      return 0;
    default:
      return BAD_PARAM;
  }
}
cudnnStatus_t cudnnBackendExecute(cudnnHandle_t, cudnnBackendDescriptor_t p, cudnnBackendDescriptor_t vp) {
  D* plan = static_cast<D*>(p);
  D* pack = static_cast<D*>(vp);
  if (!plan->fin || !pack->fin || plan->kind != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || pack->kind != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR) return BAD_PARAM;
  const Engine& e = Engines()[static_cast<size_t>(plan->engine)];
  const int s = e.flags.find('x') != std::string::npos ? NOT_SUPPORTED : 0;
  Log("{\"op\":\"execute\",\"plan\":" + std::to_string(plan->id) + ",\"pack\":" + std::to_string(pack->id) + ",\"engine\":" + std::to_string(e.id) +
      ",\"status\":" + std::to_string(s) + "}");
  return s;
}
#endif  // FAKE_NO_GRAPH

#ifndef FAKE_NO_LEGACY
// The legacy API: descriptors are dummies, one algorithm (1, tensor-op math), no workspace.
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) { *d = reinterpret_cast<cudnnTensorDescriptor_t>(&handleStorage); return 0; }
cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t, int, int, const int*, const int*) { return 0; }
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t) { return 0; }
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) { *d = reinterpret_cast<cudnnFilterDescriptor_t>(&handleStorage); return 0; }
cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t, int, int, int, const int*) { return 0; }
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t) { return 0; }
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) { *d = reinterpret_cast<cudnnConvolutionDescriptor_t>(&handleStorage); return 0; }
cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t, int, const int*, const int*, const int*, int, int) { return 0; }
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t, int) { return 0; }
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t, int) { return 0; }
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t) { return 0; }
static cudnnStatus_t OneAlgo(int n, int* found, AlgoPerf* perf) {
  if (n < 1) return BAD_PARAM;
  perf[0] = AlgoPerf{1, 0, 0.f, 0, 0, CUDNN_TENSOR_OP_MATH, {0, 0, 0}};
  *found = 1;
  return 0;
}
cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t, int* n) { *n = 2; return 0; }
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t, int* n) { *n = 2; return 0; }
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t, cudnnConvolutionDescriptor_t,
                                                     cudnnTensorDescriptor_t, int n, int* found, AlgoPerf* perf) { return OneAlgo(n, found, perf); }
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t, cudnnFilterDescriptor_t, cudnnTensorDescriptor_t, cudnnConvolutionDescriptor_t,
                                                          cudnnTensorDescriptor_t, int n, int* found, AlgoPerf* perf) { return OneAlgo(n, found, perf); }
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t, cudnnConvolutionDescriptor_t,
                                                      cudnnTensorDescriptor_t, int, size_t* b) { *b = 0; return 0; }
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t, cudnnFilterDescriptor_t, cudnnTensorDescriptor_t, cudnnConvolutionDescriptor_t,
                                                           cudnnTensorDescriptor_t, int, size_t* b) { *b = 0; return 0; }
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t, const void*, cudnnTensorDescriptor_t, const void*, cudnnFilterDescriptor_t, const void*,
                                      cudnnConvolutionDescriptor_t, int algo, void*, size_t, const void*, cudnnTensorDescriptor_t, void*) {
  Log("{\"op\":\"legacyForward\",\"algo\":" + std::to_string(algo) + "}");
  return 0;
}
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t, const void*, cudnnFilterDescriptor_t, const void*, cudnnTensorDescriptor_t, const void*,
                                           cudnnConvolutionDescriptor_t, int algo, void*, size_t, const void*, cudnnTensorDescriptor_t, void*) {
  Log("{\"op\":\"legacyBackwardData\",\"algo\":" + std::to_string(algo) + "}");
  return 0;
}
cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t, cudnnTensorDescriptor_t, const void*, cudnnFilterDescriptor_t, const void*,
                                                     cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, void*, int n, int* found, AlgoPerf* perf,
                                                     void*, size_t) { return OneAlgo(n, found, perf); }
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(cudnnHandle_t, cudnnFilterDescriptor_t, const void*, cudnnTensorDescriptor_t, const void*,
                                                          cudnnConvolutionDescriptor_t, cudnnTensorDescriptor_t, void*, int n, int* found,
                                                          AlgoPerf* perf, void*, size_t) { return OneAlgo(n, found, perf); }
#endif  // FAKE_NO_LEGACY

}  // extern "C"
