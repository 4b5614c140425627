// The legacy convolution API, one call per conv with descriptors cached per key and the algorithm from cuDNN's
// heuristics (cudnnGet*Algorithm_v7) or measured once (cudnnFind*AlgorithmEx, algoSearch 'benchmark'). Deprecated in
// 9.x; kept as the fallback of the graph path (cudnn_graph.cc).
#include "cudnn_legacy.h"

#include <algorithm>
#include <vector>

namespace fk_cudnn {
namespace {

constexpr size_t kSearchWorkspace = 64u << 20;  // the workspace an algorithm search offers the candidates

bool IsTensorOpMath(int m) { return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION; }

// What the chosen algorithm needs: the heuristics' rating can under-state it (grouped / depthwise convs), and
// cudnnConvolutionForward then refuses with BAD_PARAM, so the plan asks the engine itself.
size_t RequiredWorkspace(const LegacyPlan& p, cudnnHandle_t h, bool transposed) {
  size_t bytes = 0;
  const cudnnStatus_t s = !transposed ? dnn.cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, p.conv, p.y, p.algo, &bytes)
                                      : dnn.cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w, p.x, p.conv, p.y, p.algo, &bytes);
  return s == CUDNN_STATUS_SUCCESS ? bytes : 0;
}

// Take result r when it fits and its math is allowed; the math type it was rated with is the one it runs with.
bool Take(LegacyPlan& p, const AlgoPerf& r, size_t limit, bool exactF32, cudnnHandle_t h, bool transposed) {
  if (r.status != CUDNN_STATUS_SUCCESS || r.memory > limit) return false;
  if (exactF32 && IsTensorOpMath(r.mathType)) return false;
  if (dnn.cudnnSetConvolutionMathType(p.conv, r.mathType) != CUDNN_STATUS_SUCCESS) return false;
  p.algo = r.algo;
  p.mathType = r.mathType;
  p.workspace = std::max(r.memory, RequiredWorkspace(p, h, transposed));
  return true;
}

}  // namespace

const char* LegacyAlgoName(bool transposed, int algo) {
  static const char* const fwd[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                    "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static const char* const bwd[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  if (algo < 0) return "";
  if (!transposed) return algo < 8 ? fwd[algo] : "UNKNOWN";
  return algo < 6 ? bwd[algo] : "UNKNOWN";
}

void DestroyLegacyPlan(LegacyPlan& p) {
  if (p.x) dnn.cudnnDestroyTensorDescriptor(p.x);
  if (p.y) dnn.cudnnDestroyTensorDescriptor(p.y);
  if (p.w) dnn.cudnnDestroyFilterDescriptor(p.w);
  if (p.conv) dnn.cudnnDestroyConvolutionDescriptor(p.conv);
  p = LegacyPlan();
}

bool MakeLegacyPlan(const Problem& pr, cudnnHandle_t h, LegacyPlan* out, std::string* why) {
  LegacyPlan p;
  const int nb = pr.nb, dt = pr.dataType;
  int xd[5], xs[5], wd[5], yd[5], ys[5], pad[3], str[3], dil[3];
  for (int i = 0; i < nb; i++) {
    xd[i] = static_cast<int>(pr.xd[i]);
    xs[i] = static_cast<int>(pr.xs[i]);
    wd[i] = static_cast<int>(pr.wd[i]);
    yd[i] = static_cast<int>(pr.yd[i]);
    ys[i] = static_cast<int>(pr.ys[i]);
  }
  for (int i = 0; i < nb - 2; i++) {
    pad[i] = static_cast<int>(pr.pad[i]);
    str[i] = static_cast<int>(pr.stride[i]);
    dil[i] = static_cast<int>(pr.dil[i]);
  }
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
  STEP(dnn.cudnnSetFilterNdDescriptor(p.w, dt, pr.wChannelsLast ? 1 : 0, nb, wd), "cudnnSetFilterNdDescriptor");
  STEP(dnn.cudnnSetConvolutionNdDescriptor(p.conv, nb - 2, pad, str, dil, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
       "cudnnSetConvolutionNdDescriptor");
  STEP(dnn.cudnnSetConvolutionGroupCount(p.conv, pr.groups), "cudnnSetConvolutionGroupCount");
  STEP(dnn.cudnnSetConvolutionMathType(p.conv, pr.tensorOps ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");
  int maxCount = 0;
  if (!pr.transposed) STEP(dnn.cudnnGetConvolutionForwardAlgorithmMaxCount(h, &maxCount), "cudnnGetConvolutionForwardAlgorithmMaxCount");
  if (pr.transposed) STEP(dnn.cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &maxCount), "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
  std::vector<AlgoPerf> perf(static_cast<size_t>(maxCount > 0 ? maxCount : 1));
  int found = 0;
  if (!pr.transposed)
    STEP(dnn.cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y, maxCount, &found, perf.data()), "cudnnGetConvolutionForwardAlgorithm_v7");
  if (pr.transposed)
    STEP(dnn.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.x, p.conv, p.y, maxCount, &found, perf.data()), "cudnnGetConvolutionBackwardDataAlgorithm_v7");
#undef STEP
  if (s != CUDNN_STATUS_SUCCESS) {
    *why = std::string(step) + ": " + StatusText(s);
    DestroyLegacyPlan(p);
    return false;
  }
  // The heuristics' order, first that works within the workspace limit; exact f32 (TF32 off) skips tensor-op results.
  const bool exactF32 = !pr.tensorOps && dt == CUDNN_DATA_FLOAT;
  for (int i = 0; i < found; i++) {
    if (Take(p, perf[static_cast<size_t>(i)], pr.workspaceLimit, exactF32, h, pr.transposed)) {
      *out = p;
      return true;
    }
  }
  *why = "no algorithm among " + std::to_string(found) + " fits (workspace limit " + std::to_string(pr.workspaceLimit) + " bytes)";
  DestroyLegacyPlan(p);
  return false;
}

Outcome RunLegacy(LegacyPlan& p, const Problem& pr, cudnnHandle_t h, const Buffers& b) {
  cudnnStatus_t s;
  if (pr.search && !p.searched) {
    // measure once, on this call's buffers (y is overwritten, then written by the run below), with a workspace of
    // up to the search size: ask the caller for it first
    const size_t want = std::min(pr.workspaceLimit, kSearchWorkspace);
    if (b.workspaceBytes < want) return Outcome::Need(want);
    s = dnn.cudnnSetStream(h, b.stream);
    if (s != CUDNN_STATUS_SUCCESS) return Outcome::Error(s, "cudnnSetStream");
    std::array<AlgoPerf, 16> perf{};
    int found = 0;
    s = !pr.transposed
            ? dnn.cudnnFindConvolutionForwardAlgorithmEx(h, p.x, b.x, p.w, b.w, p.conv, p.y, b.y, 16, &found, perf.data(), b.workspace, b.workspaceBytes)
            : dnn.cudnnFindConvolutionBackwardDataAlgorithmEx(h, p.w, b.w, p.x, b.x, p.conv, p.y, b.y, 16, &found, perf.data(), b.workspace, b.workspaceBytes);
    p.searched = true;  // measured or not, once: a failed search keeps the heuristics' choice
    const bool exactF32 = !pr.tensorOps && pr.dataType == CUDNN_DATA_FLOAT;
    for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < found; i++)  // sorted by time: the fastest that fits
      if (Take(p, perf[static_cast<size_t>(i)], b.workspaceBytes, exactF32, h, pr.transposed)) break;
    dnn.cudnnSetConvolutionMathType(p.conv, p.mathType);
  }
  if (p.workspace > b.workspaceBytes) return Outcome::Need(p.workspace);
  s = dnn.cudnnSetStream(h, b.stream);
  if (s != CUDNN_STATUS_SUCCESS) return Outcome::Error(s, "cudnnSetStream");
  const float one = 1.f, zero = 0.f;  // scaling factors are float for f32 / f16 / bf16 data
  s = !pr.transposed
          ? dnn.cudnnConvolutionForward(h, &one, p.x, b.x, p.w, b.w, p.conv, p.algo, b.workspace, p.workspace, &zero, p.y, b.y)
          : dnn.cudnnConvolutionBackwardData(h, &one, p.w, b.w, p.x, b.x, p.conv, p.algo, b.workspace, p.workspace, &zero, p.y, b.y);
  const char* fn = !pr.transposed ? "cudnnConvolutionForward" : "cudnnConvolutionBackwardData";
  // an algorithm the heuristics offered but the engine refuses at launch (nothing ran)
  if (IsNotSupported(s)) return Outcome::Refused(std::string(fn) + ": " + StatusText(s));
  if (s != CUDNN_STATUS_SUCCESS) return Outcome::Error(s, fn);
  return Outcome::Ran();
}

}  // namespace fk_cudnn
