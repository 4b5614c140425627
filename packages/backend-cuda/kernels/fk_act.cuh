// The gate activation of the gated MLPs, in fp32: -DFK_ACT=0 silu | 1 gelu (exact erf) | 2 gelu (tanh approximation).
// One definition for fk_act_and_mul (activation.cu) and the GEMV that applies it in its epilogue (gemv.cu, FK_GLU), so
// the fused and unfused paths round the same values the same way.
#pragma once
#ifndef FK_ACT
#define FK_ACT 0
#endif

__device__ __forceinline__ float fk_act(float g) {
#if FK_ACT == 0
  return g / (1.f + __expf(-g));
#elif FK_ACT == 1
  return 0.5f * g * (1.f + erff(g * 0.70710678118654752440f));
#else
  const float k0 = 0.79788456080286535588f;  // sqrt(2/pi)
  return 0.5f * g * (1.f + tanhf(k0 * (g + 0.044715f * g * g * g)));
#endif
}
