// Convolutions on cuDNN's backend (graph) API, the path PyTorch takes through cudnn-frontend: an operation graph of
// one convolution node (forward, or backward-data for transposed convs), engine configs from the heuristics (instant
// mode, then the fallback list), execution plans built in that order until one finalises within the workspace limit,
// run with a variant pack. With algoSearch 'benchmark' the first few plans are timed on the call's buffers and the
// fastest kept (cudnn.benchmark).
#pragma once
#include <array>
#include <string>
#include <vector>

#include "cudnn_api.h"

namespace fk_cudnn {

// An owned backend descriptor, destroyed with its holder (move-only).
class Desc {
 public:
  Desc() = default;
  explicit Desc(cudnnBackendDescriptor_t d) : d_(d) {}
  ~Desc() { reset(); }
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    if (this != &o) {
      reset();
      d_ = o.d_;
      o.d_ = nullptr;
    }
    return *this;
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  explicit operator bool() const { return d_ != nullptr; }
  void reset();

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// An engine config the heuristics offered and the filters kept.
struct EngineConfig {
  Desc cfg;
  int64_t engine = -1;  // CUDNN_ATTR_ENGINE_GLOBAL_INDEX
  std::string tag;      // "eng<id>_k<knob>=<value>..." as cudnn-frontend tags plans
};

// A finalised execution plan of one engine config.
struct GraphCandidate {
  Desc plan;
  size_t config = 0;  // index into GraphPlan::configs
  size_t workspace = 0;
  float ms = -1.f;  // measured by a benchmark search; -1 when not measured
};

struct GraphPlan {
  std::vector<Desc> owned;            // tensors, convolution, operation, operation graph: alive as long as the plan
  std::vector<EngineConfig> configs;  // heuristics order, filtered, duplicates removed
  size_t nextConfig = 0;              // the next config a refused plan moves on to
  GraphCandidate current;             // the plan in use
  std::vector<GraphCandidate> timing;  // the other candidates of a benchmark search (kept across the workspace request)
  bool searched = false;
  int timedPlans = 0;       // plans a benchmark search measured
  std::string skipped;      // why configs before the current one were passed over (informative)
  std::string searchNote;   // why a benchmark search measured nothing, if it did not
  Desc pack;                // the variant pack of the last call, rebuilt when a pointer changes
  std::array<void*, 4> packPtrs{};
};

// The operation graph, its engine configs and the first plan that finalises within the workspace limit; false with
// the failing step (or every config's reason) in *why.
bool MakeGraphPlan(const Problem& pr, cudnnHandle_t h, GraphPlan* g, std::string* why);
// Run on this call's buffers (a benchmark search first when the problem asks and it was not done); a plan the engine
// refuses at launch gives way to the next config.
Outcome RunGraph(GraphPlan& g, const Problem& pr, cudnnHandle_t h, const Buffers& b);
const EngineConfig* CurrentConfig(const GraphPlan& g);

}  // namespace fk_cudnn
