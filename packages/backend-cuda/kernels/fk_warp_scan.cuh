// One warp's exclusive scan of n ints (any n, 32 at a time with a carry): out[i] = value(0) + ... + value(i - 1) for
// i <= n, out[n] the total. `value(i)` reads element i (a count, a padded count, ...); out must not alias what it reads.
// Called by the 32 lanes of one warp (lane = threadIdx.x % 32).
#pragma once

template <typename Value>
__device__ __forceinline__ void fk_warp_exclusive_scan(Value value, int* out, int n, int lane) {
  int carry = 0;
  for (int base = 0; base < n; base += 32) {
    const int v = base + lane < n ? value(base + lane) : 0;
    int inc = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, inc, o);
      if (lane >= o) inc += y;
    }
    if (base + lane < n) out[base + lane] = carry + inc - v;
    carry += __shfl_sync(0xffffffffu, inc, 31);
  }
  if (lane == 0) out[n] = carry;
}
