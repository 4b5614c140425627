// The legacy convolution API (cudnnConvolutionForward / BackwardData, algorithms from cudnnGet*Algorithm_v7 or
// measured by cudnnFind*AlgorithmEx): the path convs take where the graph API is missing or no engine takes the shape.
#pragma once
#include "cudnn_api.h"

namespace fk_cudnn {

struct LegacyPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = -1;
  int mathType = 0;
  size_t workspace = 0;
  bool searched = false;  // the algorithm was measured (cudnnFind*AlgorithmEx), not only picked by the heuristics
};

// Descriptors and the heuristics' first algorithm that fits; false (with the failing step in *why) when none does.
bool MakeLegacyPlan(const Problem& pr, cudnnHandle_t h, LegacyPlan* p, std::string* why);
// Run on this call's buffers (measuring the algorithms first when the problem asks and it was not done yet).
Outcome RunLegacy(LegacyPlan& p, const Problem& pr, cudnnHandle_t h, const Buffers& b);
void DestroyLegacyPlan(LegacyPlan& p);
// cudnnConvolutionFwdAlgo_t / cudnnConvolutionBwdDataAlgo_t without the prefix, e.g. "IMPLICIT_PRECOMP_GEMM".
const char* LegacyAlgoName(bool transposed, int algo);

}  // namespace fk_cudnn
