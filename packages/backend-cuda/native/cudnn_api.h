// What the cuDNN conv files share (cudnn.cc: loading and dispatch; cudnn_graph.cc: the backend graph API;
// cudnn_legacy.cc: the legacy API): the dlsym'ed entry points, the decoded plan key, the buffers of one call and the
// outcome of running a plan.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "cudnn_decls.h"

namespace fk_cudnn {

#define FK_DECLARE_PTR(name, ret, args) ret(*name) args = nullptr;
struct Api {
  FK_CUDNN_CORE_FUNCS(FK_DECLARE_PTR)
  FK_CUDNN_GRAPH_FUNCS(FK_DECLARE_PTR)
  FK_CUDNN_LEGACY_FUNCS(FK_DECLARE_PTR)
  void (*cudnnGetLastErrorString)(char*, size_t) = nullptr;  // optional (9.0+)
  bool graph = false;   // every FK_CUDNN_GRAPH_FUNCS entry resolved
  bool legacy = false;  // every FK_CUDNN_LEGACY_FUNCS entry resolved
};
#undef FK_DECLARE_PTR
extern Api dnn;

std::string StatusName(cudnnStatus_t s);
// "NAME (cuDNN's last error message)": what a decline reason quotes.
std::string StatusText(cudnnStatus_t s);
// NOT_SUPPORTED in cuDNN 9's numbering (3xxx) or cuDNN 8's (9).
bool IsNotSupported(cudnnStatus_t s);
// A status by which an engine refuses a problem (nothing ran): NOT_SUPPORTED or BAD_PARAM (2xxx, cuDNN 8: 3).
bool IsRefusal(cudnnStatus_t s);

// The parameter block (src/ops/conv/cudnn-params.ts writes it): [0, kKeyLen) the key, then pointers and stream.
constexpr int kKeyLen = 44;
constexpr int kParamLen = 50;
// The plan key: the block's key plus the operands' pointer alignment, which the addon derives from the pointers
// itself (the graph API's tensors promise it to the engines, so it must hold for every call of the plan).
using Key = std::array<int64_t, kKeyLen + 1>;

enum class ApiChoice : int { kAuto = 0, kGraph = 1, kLegacy = 2 };

// One convolution as the key describes it. Dims and strides are [n, c, (d), h, w]; the filter is [out role, in role /
// groups, *k] packed KCRS or KRSC. Transposed convs are backward-data: x plays dy and y plays dx.
struct Problem {
  bool transposed = false;
  int nb = 4;  // tensor rank: 4 or 5 (conv1d runs as a 2-d conv with a unit height)
  int dataType = CUDNN_DATA_FLOAT;
  bool tensorOps = true;  // f32: TF32 allowed; always true for f16 / bf16
  int groups = 1;
  int device = 0;
  int64_t xd[5] = {}, xs[5] = {}, wd[5] = {}, yd[5] = {}, ys[5] = {};
  bool wChannelsLast = false;
  int64_t pad[3] = {}, stride[3] = {}, dil[3] = {};
  size_t workspaceLimit = 0;
  bool search = false;  // measure the candidates on the first call (cudnn.benchmark)
  ApiChoice api = ApiChoice::kAuto;
  int64_t xAlign = 16, wAlign = 16, yAlign = 16;  // bytes, at most 16
};
Problem Decode(const Key& k);

// This call's device pointers, workspace and stream.
struct Buffers {
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
  void* workspace = nullptr;
  size_t workspaceBytes = 0;
  void* stream = nullptr;
};

// What running a plan came to.
struct Outcome {
  enum Kind { kRan, kNeedWorkspace, kRefused, kError } kind = kRan;
  size_t bytes = 0;                          // kNeedWorkspace: what the plan needs (nothing ran)
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;  // kError
  std::string what;                          // kRefused: why; kError: the failing function
  static Outcome Ran() { return Outcome(); }
  static Outcome Need(size_t b) { Outcome o; o.kind = kNeedWorkspace; o.bytes = b; return o; }
  static Outcome Refused(std::string why) { Outcome o; o.kind = kRefused; o.what = std::move(why); return o; }
  static Outcome Error(cudnnStatus_t s, std::string fn) { Outcome o; o.kind = kError; o.status = s; o.what = std::move(fn); return o; }
};

}  // namespace fk_cudnn
