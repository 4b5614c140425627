// Convolutions on cuDNN's backend (graph) API (see cudnn_graph.h). Attribute names, types and order as cudnn-frontend
// sets them; every call's status is checked and a failure names its descriptor and attribute, which the decline
// reason quotes (the caller then tries the legacy API, then the fallback kernel).
#include "cudnn_graph.h"

#include <dlfcn.h>

#include <algorithm>

namespace fk_cudnn {

void Desc::reset() {
  if (d_ && dnn.cudnnBackendDestroyDescriptor) dnn.cudnnBackendDestroyDescriptor(d_);
  d_ = nullptr;
}

namespace {

// Unique ids of the graph's tensors, as PyTorch names them.
constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y';
// Numerical notes / knob choices read from an engine (config): room for more kinds than cuDNN 9.6 has (10 / 37),
// asked again with 9.6's counts where a cuDNN refuses the larger request.
constexpr int kMaxNotes = 32, kNotes96 = 10;
constexpr int kMaxKnobs = 64, kKnobs96 = 37;
// A benchmark search times this many plans at most (torch.backends.cudnn.benchmark_limit's default), each candidate
// other than the heuristics' choice only if its workspace is within kSearchWorkspace.
constexpr size_t kBenchmarkPlans = 10;
constexpr size_t kSearchWorkspace = 64u << 20;
constexpr int kTimedRuns = 3;  // after a warm-up; the median is the plan's time

// Backend calls in order until one fails; the first failure is kept with the step that made it.
class Steps {
 public:
  bool ok() const { return s_ == CUDNN_STATUS_SUCCESS; }
  std::string Why() const { return step_ + ": " + StatusText(s_); }
  Desc Create(int type, const std::string& what) {
    cudnnBackendDescriptor_t d = nullptr;
    if (ok()) Check(dnn.cudnnBackendCreateDescriptor(type, &d), what, "cudnnBackendCreateDescriptor");
    return Desc(ok() ? d : nullptr);
  }
  void Set(const Desc& d, const std::string& what, const char* attr, int name, int type, int64_t n, const void* v) {
    if (ok()) Check(dnn.cudnnBackendSetAttribute(d.get(), name, type, n, v), what, attr);
  }
  void Get(cudnnBackendDescriptor_t d, const std::string& what, const char* attr, int name, int type, int64_t n, int64_t* got, void* v) {
    if (ok()) Check(dnn.cudnnBackendGetAttribute(d, name, type, n, got, v), what, attr);
  }
  void Finalize(const Desc& d, const std::string& what) {
    if (ok()) Check(dnn.cudnnBackendFinalize(d.get()), what, "cudnnBackendFinalize");
  }

 private:
  void Check(cudnnStatus_t s, const std::string& what, const char* step) {
    s_ = s;
    if (s != CUDNN_STATUS_SUCCESS) step_ = what + " " + step;
  }
  cudnnStatus_t s_ = CUDNN_STATUS_SUCCESS;
  std::string step_;
};
#define FK_SET(st, d, what, ATTR, TYPE, n, v) (st).Set(d, what, #ATTR, ATTR, TYPE, n, v)
#define FK_GET(st, d, what, ATTR, TYPE, n, got, v) (st).Get(d, what, #ATTR, ATTR, TYPE, n, got, v)

// The dims from innermost to outermost in memory: channels-last [n, c, *sp] keeps c innermost, then w, h, d, n.
void MemoryOrder(int nb, bool channelsLast, int* order) {
  int k = 0;
  if (channelsLast) order[k++] = 1;
  for (int d = nb - 1; d > 1; d--) order[k++] = d;
  if (!channelsLast) order[k++] = 1;
  order[k] = 0;
}

// Strides of unit dims made what a packed tensor has there (cuDNN's layout checks look at them; torch's
// fixSizeOneDimStride does the same); other strides as given.
void FixUnitStrides(int nb, bool channelsLast, const int64_t* dims, const int64_t* in, int64_t* out) {
  int order[5];
  MemoryOrder(nb, channelsLast, order);
  int64_t z = 1;
  for (int i = 0; i < nb; i++) {
    const int d = order[i];
    out[d] = dims[d] == 1 ? z : in[d];
    if (dims[d] != 1) z *= dims[d];
  }
}

// Packed strides of the filter in its format (KCRS or KRSC).
void PackedStrides(int nb, bool channelsLast, const int64_t* dims, int64_t* out) {
  int order[5];
  MemoryOrder(nb, channelsLast, order);
  int64_t z = 1;
  for (int i = 0; i < nb; i++) {
    out[order[i]] = z;
    z *= dims[order[i]];
  }
}

Desc Tensor(Steps& st, const std::string& what, int64_t uid, int dataType, int nb, const int64_t* dims,
            const int64_t* strides, int64_t alignment) {
  Desc t = st.Create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, what);
  const bool isVirtual = false;
  FK_SET(st, t, what, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dataType);
  FK_SET(st, t, what, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nb, dims);
  FK_SET(st, t, what, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nb, strides);
  FK_SET(st, t, what, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  FK_SET(st, t, what, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  FK_SET(st, t, what, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &isVirtual);
  st.Finalize(t, what);
  return t;
}

// Tensors, convolution, the one operation and the operation graph; their descriptors go to g->owned, the graph last.
bool BuildOperationGraph(const Problem& pr, cudnnHandle_t h, GraphPlan* g, std::string* why) {
  Steps st;
  const int nb = pr.nb;
  const bool cl = pr.wChannelsLast;  // x, w and y share the format
  int64_t xs[5], ws[5], ys[5];
  FixUnitStrides(nb, cl, pr.xd, pr.xs, xs);
  FixUnitStrides(nb, cl, pr.yd, pr.ys, ys);
  PackedStrides(nb, cl, pr.wd, ws);
  Desc x = Tensor(st, "tensor x", kUidX, pr.dataType, nb, pr.xd, xs, pr.xAlign);
  Desc w = Tensor(st, "tensor w", kUidW, pr.dataType, nb, pr.wd, ws, pr.wAlign);
  Desc y = Tensor(st, "tensor y", kUidY, pr.dataType, nb, pr.yd, ys, pr.yAlign);

  const std::string cw = "convolution";
  Desc conv = st.Create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, cw);
  const int64_t sp = nb - 2;
  const int compType = CUDNN_DATA_FLOAT;  // f32 accumulation for f32 / f16 / bf16 data, as PyTorch
  const int mode = CUDNN_CROSS_CORRELATION;
  FK_SET(st, conv, cw, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compType);
  FK_SET(st, conv, cw, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  FK_SET(st, conv, cw, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sp);
  FK_SET(st, conv, cw, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, sp, pr.pad);
  FK_SET(st, conv, cw, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, sp, pr.pad);  // symmetric (plan.ts)
  FK_SET(st, conv, cw, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, sp, pr.dil);
  FK_SET(st, conv, cw, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, sp, pr.stride);
  st.Finalize(conv, cw);

  // groups are implied by the dims: x has C channels, w [out, C / groups, *k]
  const float alpha = 1.f, beta = 0.f;
  cudnnBackendDescriptor_t xd = x.get(), wd = w.get(), yd = y.get(), cd = conv.get();
  Desc op;
  if (!pr.transposed) {
    const std::string ow = "convolution forward";
    op = st.Create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, ow);
    FK_SET(st, op, ow, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &xd);
    FK_SET(st, op, ow, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &wd);
    FK_SET(st, op, ow, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &yd);
    FK_SET(st, op, ow, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd);
    FK_SET(st, op, ow, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    FK_SET(st, op, ow, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    st.Finalize(op, ow);
  } else {  // conv_transpose(x) = the data gradient of conv with dy = x, dx = y
    const std::string ow = "convolution backward data";
    op = st.Create(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, ow);
    FK_SET(st, op, ow, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &xd);
    FK_SET(st, op, ow, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &wd);
    FK_SET(st, op, ow, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &yd);
    FK_SET(st, op, ow, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd);
    FK_SET(st, op, ow, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    FK_SET(st, op, ow, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    st.Finalize(op, ow);
  }

  const std::string gw = "operation graph";
  Desc graph = st.Create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, gw);
  cudnnBackendDescriptor_t od = op.get();
  FK_SET(st, graph, gw, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &od);
  FK_SET(st, graph, gw, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  st.Finalize(graph, gw);
  if (!st.ok()) {
    *why = st.Why();
    return false;
  }
  g->owned.push_back(std::move(x));
  g->owned.push_back(std::move(w));
  g->owned.push_back(std::move(y));
  g->owned.push_back(std::move(conv));
  g->owned.push_back(std::move(op));
  g->owned.push_back(std::move(graph));
  return true;
}

const char* ModeName(int mode) {
  return mode == CUDNN_HEUR_MODE_INSTANT ? "heuristics (instant)" : mode == CUDNN_HEUR_MODE_B ? "heuristics (mode B)" : "heuristics (fallback list)";
}

// The engine configs the heuristics offer for the graph in `mode`, best first.
bool Heuristics(cudnnBackendDescriptor_t graph, int mode, std::vector<Desc>* out, std::string* why) {
  Steps st;
  const std::string hw = ModeName(mode);
  Desc heur = st.Create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, hw);
  FK_SET(st, heur, hw, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
  FK_SET(st, heur, hw, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  st.Finalize(heur, hw);
  int64_t count = 0;
  FK_GET(st, heur.get(), hw, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
  std::vector<Desc> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; st.ok() && i < count; i++) {
    cfgs.push_back(st.Create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, hw + " result"));
    raw.push_back(cfgs.back().get());
  }
  int64_t got = 0;
  if (count > 0) FK_GET(st, heur.get(), hw, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data());
  if (!st.ok()) {
    *why = st.Why();
    return false;
  }
  for (int64_t i = 0; i < std::min(got, count); i++) out->push_back(std::move(cfgs[static_cast<size_t>(i)]));
  return true;
}

// The engine behind a config: its global index, numerical notes and knob choices (for the tag); false when the
// engine or its notes cannot be read (its numerics are then unknown and the config is skipped).
bool Inspect(const Desc& cfg, int64_t* engineId, std::vector<int>* notes, std::string* tag, std::string* why) {
  Steps st;
  Desc engine = st.Create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0;
  FK_GET(st, cfg.get(), "engine config", CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e);
  FK_GET(st, e, "engine", CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, engineId);
  int raw[kMaxNotes];
  int64_t nNotes = 0;
  if (st.ok() && dnn.cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, kMaxNotes, &nNotes, raw) != CUDNN_STATUS_SUCCESS)
    FK_GET(st, e, "engine", CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, kNotes96, &nNotes, raw);
  if (!st.ok()) {
    *why = st.Why();
    return false;
  }
  notes->assign(raw, raw + std::min<int64_t>(nNotes, kMaxNotes));
  *tag = "eng" + std::to_string(*engineId);
  // knob choices only name the config: a failure to read them leaves the tag at the engine
  Steps ks;
  std::vector<Desc> knobs;
  std::vector<cudnnBackendDescriptor_t> kraw;
  for (int i = 0; ks.ok() && i < kMaxKnobs; i++) {
    knobs.push_back(ks.Create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, "knob choice"));
    kraw.push_back(knobs.back().get());
  }
  int64_t nKnobs = 0;
  if (ks.ok() && dnn.cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, kMaxKnobs, &nKnobs, kraw.data()) != CUDNN_STATUS_SUCCESS)
    FK_GET(ks, cfg.get(), "engine config", CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, kKnobs96, &nKnobs, kraw.data());
  std::string knobTag;
  for (int64_t i = 0; ks.ok() && i < std::min<int64_t>(nKnobs, kMaxKnobs); i++) {
    int type = 0;
    int64_t value = 0, m = 0;
    FK_GET(ks, kraw[static_cast<size_t>(i)], "knob choice", CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &m, &type);
    FK_GET(ks, kraw[static_cast<size_t>(i)], "knob choice", CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &m, &value);
    knobTag += "_k" + std::to_string(type) + "=" + std::to_string(value);
  }
  if (ks.ok()) *tag += knobTag;
  return true;
}

// Engine configs for the graph: instant-mode heuristics then the fallback list (mode B where instant fails), filtered
// as PyTorch filters them and without duplicates. *notes says what was left out and why.
void CollectConfigs(const Problem& pr, cudnnBackendDescriptor_t graph, GraphPlan* g, std::string* notes) {
  const bool exactF32 = pr.dataType == CUDNN_DATA_FLOAT && !pr.tensorOps;
  std::vector<std::string> filtered;  // tags left out for their numerics (a config may be in both lists)
  std::vector<int> modes = {CUDNN_HEUR_MODE_INSTANT, CUDNN_HEUR_MODE_FALLBACK};
  for (size_t m = 0; m < modes.size(); m++) {
    std::vector<Desc> cfgs;
    std::string why;
    if (!Heuristics(graph, modes[m], &cfgs, &why)) {
      *notes += (notes->empty() ? "" : "; ") + why;
      if (modes[m] == CUDNN_HEUR_MODE_INSTANT) modes.insert(modes.begin() + static_cast<long>(m) + 1, CUDNN_HEUR_MODE_B);
      continue;
    }
    for (Desc& c : cfgs) {
      EngineConfig ec;
      std::vector<int> ns;
      if (!Inspect(c, &ec.engine, &ns, &ec.tag, &why)) {
        *notes += (notes->empty() ? "" : "; ") + why;
        continue;
      }
      auto hasNote = [&](int note) { return std::find(ns.begin(), ns.end(), note) != ns.end(); };
      // inputs converted to a narrower type are never wanted; tensor cores on f32 data are TF32, which exact f32
      // (allowTf32 off) excludes
      if (hasNote(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) || (exactF32 && hasNote(CUDNN_NUMERICAL_NOTE_TENSOR_CORE))) {
        if (std::find(filtered.begin(), filtered.end(), ec.tag) == filtered.end()) filtered.push_back(ec.tag);
        continue;
      }
      const bool dup = std::any_of(g->configs.begin(), g->configs.end(), [&](const EngineConfig& o) { return o.tag == ec.tag; });
      if (dup) continue;
      ec.cfg = std::move(c);
      g->configs.push_back(std::move(ec));
    }
  }
  if (!filtered.empty()) {
    *notes += (notes->empty() ? "" : "; ") + std::to_string(filtered.size()) + " config(s) left out for their numerics" +
              (exactF32 ? " (tensor cores / TF32 with allowTf32 off, or down-converted inputs)" : " (down-converted inputs)");
  }
}

bool BuildPlan(cudnnHandle_t h, const EngineConfig& c, size_t index, GraphCandidate* out, std::string* why) {
  Steps st;
  const std::string pw = "execution plan " + c.tag;
  Desc plan = st.Create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, pw);
  cudnnBackendDescriptor_t cd = c.cfg.get();
  FK_SET(st, plan, pw, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  FK_SET(st, plan, pw, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd);
  st.Finalize(plan, pw);
  int64_t ws = 0, n = 0;
  FK_GET(st, plan.get(), pw, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws);
  if (!st.ok()) {
    *why = st.Why();
    return false;
  }
  if (ws < 0) {
    *why = pw + ": negative workspace size " + std::to_string(ws);
    return false;
  }
  out->plan = std::move(plan);
  out->config = index;
  out->workspace = static_cast<size_t>(ws);
  out->ms = -1.f;
  return true;
}

void Note(std::string* s, const std::string& what) {
  if (s->size() > 600) return;  // the first few reasons say enough
  *s += (s->empty() ? "" : "; ") + what;
}

// Move to the next config whose plan finalises within the workspace limit.
bool AdvancePlan(GraphPlan& g, const Problem& pr, cudnnHandle_t h, std::string* why) {
  while (g.nextConfig < g.configs.size()) {
    const size_t i = g.nextConfig++;
    GraphCandidate c;
    std::string w;
    if (!BuildPlan(h, g.configs[i], i, &c, &w)) {
      Note(&g.skipped, w);
      continue;
    }
    if (c.workspace > pr.workspaceLimit) {
      Note(&g.skipped, g.configs[i].tag + ": workspace " + std::to_string(c.workspace) + " > limit " + std::to_string(pr.workspaceLimit));
      continue;
    }
    g.current = std::move(c);
    g.pack.reset();
    return true;
  }
  *why = "no engine config of " + std::to_string(g.configs.size()) + " finalised within the workspace limit" +
         (g.skipped.empty() ? "" : " (" + g.skipped + ")");
  return false;
}

Desc MakePack(const Buffers& b, std::string* why) {
  Steps st;
  const std::string vw = "variant pack";
  Desc pack = st.Create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, vw);
  void* ptrs[3] = {b.x, b.w, b.y};
  const int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* ws = b.workspace;
  FK_SET(st, pack, vw, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
  FK_SET(st, pack, vw, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
  FK_SET(st, pack, vw, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  st.Finalize(pack, vw);
  if (!st.ok()) {
    *why = st.Why();
    return Desc();
  }
  return pack;
}

// CUDA events from the driver the addon already loaded (looked up, never loaded here), for a benchmark search.
class Timer {
 public:
  typedef int (*EventCreate)(void**, unsigned);
  typedef int (*EventDestroy)(void*);
  typedef int (*EventRecord)(void*, void*);
  typedef int (*EventSync)(void*);
  typedef int (*EventElapsed)(float*, void*, void*);
  Timer() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) {
      why_ = "the CUDA driver is not loaded";
      return;
    }
    create_ = reinterpret_cast<EventCreate>(dlsym(lib, "cuEventCreate"));
    destroy_ = reinterpret_cast<EventDestroy>(dlsym(lib, "cuEventDestroy_v2"));
    record_ = reinterpret_cast<EventRecord>(dlsym(lib, "cuEventRecord"));
    sync_ = reinterpret_cast<EventSync>(dlsym(lib, "cuEventSynchronize"));
    elapsed_ = reinterpret_cast<EventElapsed>(dlsym(lib, "cuEventElapsedTime_v2"));
    if (!elapsed_) elapsed_ = reinterpret_cast<EventElapsed>(dlsym(lib, "cuEventElapsedTime"));
    dlclose(lib);  // drops only the reference taken above
    if (!create_ || !destroy_ || !record_ || !sync_ || !elapsed_) {
      why_ = "the CUDA driver lacks the event functions";
      return;
    }
    if (create_(&start_, 0) != 0 || create_(&stop_, 0) != 0) why_ = "cuEventCreate failed";
  }
  ~Timer() {
    if (start_) destroy_(start_);
    if (stop_) destroy_(stop_);
  }
  bool ok() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  // Milliseconds of one cudnnBackendExecute of plan on stream (after the work already queued there); -1 on failure.
  float Time(cudnnHandle_t h, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack, void* stream) {
    if (record_(start_, stream) != 0) return -1.f;
    if (dnn.cudnnBackendExecute(h, plan, pack) != CUDNN_STATUS_SUCCESS) return -1.f;
    float ms = -1.f;
    if (record_(stop_, stream) != 0 || sync_(stop_) != 0 || elapsed_(&ms, start_, stop_) != 0) return -1.f;
    return ms;
  }

 private:
  EventCreate create_ = nullptr;
  EventDestroy destroy_ = nullptr;
  EventRecord record_ = nullptr;
  EventSync sync_ = nullptr;
  EventElapsed elapsed_ = nullptr;
  void* start_ = nullptr;
  void* stop_ = nullptr;
  std::string why_;
};

// A warm-up, then the median of kTimedRuns; -1 when the plan does not run.
float Measure(Timer& t, cudnnHandle_t h, const GraphCandidate& c, const Buffers& b) {
  std::string why;
  Desc pack = MakePack(b, &why);
  if (!pack) return -1.f;
  if (t.Time(h, c.plan.get(), pack.get(), b.stream) < 0) return -1.f;
  float runs[kTimedRuns];
  for (float& r : runs) {
    r = t.Time(h, c.plan.get(), pack.get(), b.stream);
    if (r < 0) return -1.f;
  }
  std::sort(runs, runs + kTimedRuns);
  return runs[kTimedRuns / 2];
}

// cudnn.benchmark: time the heuristics' plan and up to kBenchmarkPlans - 1 more, keep the fastest. kRan when done
// (measured or not), kNeedWorkspace when the candidates want a larger workspace first.
Outcome Search(GraphPlan& g, const Problem& pr, cudnnHandle_t h, const Buffers& b) {
  if (g.timing.empty()) {
    const size_t cap = std::min(pr.workspaceLimit, std::max(g.current.workspace, kSearchWorkspace));
    for (size_t i = 0; i < g.configs.size() && g.timing.size() + 1 < kBenchmarkPlans; i++) {
      if (i == g.current.config) continue;
      GraphCandidate c;
      std::string why;
      if (BuildPlan(h, g.configs[i], i, &c, &why) && c.workspace <= cap) g.timing.push_back(std::move(c));
    }
  }
  size_t need = g.current.workspace;
  for (const GraphCandidate& c : g.timing) need = std::max(need, c.workspace);
  if (b.workspaceBytes < need) return Outcome::Need(need);
  g.searched = true;
  Timer t;
  cudnnStatus_t s = t.ok() ? dnn.cudnnSetStream(h, b.stream) : CUDNN_STATUS_SUCCESS;
  if (!t.ok() || s != CUDNN_STATUS_SUCCESS) {
    g.searchNote = t.ok() ? "cudnnSetStream: " + StatusText(s) : t.why();
    g.timing.clear();
    return Outcome::Ran();
  }
  g.current.ms = Measure(t, h, g.current, b);
  g.timedPlans = g.current.ms >= 0 ? 1 : 0;
  GraphCandidate* best = g.current.ms >= 0 ? &g.current : nullptr;
  for (GraphCandidate& c : g.timing) {
    c.ms = Measure(t, h, c, b);
    if (c.ms < 0) continue;
    g.timedPlans++;
    if (!best || c.ms < best->ms) best = &c;
  }
  if (best && best != &g.current) {
    g.current = std::move(*best);
    g.pack.reset();
  }
  if (!best) g.searchNote = "no candidate ran while timing";
  g.timing.clear();
  return Outcome::Ran();
}

}  // namespace

bool MakeGraphPlan(const Problem& pr, cudnnHandle_t h, GraphPlan* g, std::string* why) {
  if (!BuildOperationGraph(pr, h, g, why)) return false;
  std::string notes;
  CollectConfigs(pr, g->owned.back().get(), g, &notes);
  if (g->configs.empty()) {
    *why = "the heuristics offered no usable engine config" + (notes.empty() ? "" : " (" + notes + ")");
    return false;
  }
  g->skipped = notes;
  return AdvancePlan(*g, pr, h, why);
}

const EngineConfig* CurrentConfig(const GraphPlan& g) {
  return g.current.plan && g.current.config < g.configs.size() ? &g.configs[g.current.config] : nullptr;
}

Outcome RunGraph(GraphPlan& g, const Problem& pr, cudnnHandle_t h, const Buffers& b) {
  if (pr.search && !g.searched) {
    Outcome o = Search(g, pr, h, b);
    if (o.kind != Outcome::kRan) return o;
  }
  for (;;) {
    if (g.current.workspace > b.workspaceBytes) return Outcome::Need(g.current.workspace);
    const std::array<void*, 4> ptrs = {b.x, b.w, b.y, b.workspace};
    if (!g.pack || ptrs != g.packPtrs) {
      std::string why;
      g.pack = MakePack(b, &why);
      if (!g.pack) return Outcome::Refused(why);
      g.packPtrs = ptrs;
    }
    cudnnStatus_t s = dnn.cudnnSetStream(h, b.stream);
    if (s != CUDNN_STATUS_SUCCESS) return Outcome::Error(s, "cudnnSetStream");
    s = dnn.cudnnBackendExecute(h, g.current.plan.get(), g.pack.get());
    if (s == CUDNN_STATUS_SUCCESS) return Outcome::Ran();
    if (!IsRefusal(s)) return Outcome::Error(s, "cudnnBackendExecute");
    // the engine refused at launch (nothing ran): the next config in the heuristics' order
    const EngineConfig* c = CurrentConfig(g);
    const std::string refused = "cudnnBackendExecute (" + (c ? c->tag : std::string("?")) + "): " + StatusText(s);
    Note(&g.skipped, refused);
    std::string why;
    if (!AdvancePlan(g, pr, h, &why)) return Outcome::Refused(refused + "; " + why);
  }
}

}  // namespace fk_cudnn
