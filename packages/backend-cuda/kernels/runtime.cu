// Small kernels the runtime itself uses: the launch-overhead probe and test helpers.
// Standalone with `nvcc -std=c++17 -arch=sm_90a -c`; NVRTC compiles it as-is.

// Does nothing: launch overhead is all that is measured.
extern "C" __global__ void fk_empty() {}

// out[i] = a[i] * scale + i (a known pattern for round-trip and graph tests).
extern "C" __global__ void fk_axpi(float* __restrict__ out, const float* __restrict__ a, float scale, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] * scale + (float)i;
}

// Writes through a caller-supplied address: used by the tests to provoke CUDA_ERROR_ILLEGAL_ADDRESS.
extern "C" __global__ void fk_poke(unsigned long long address, int value) {
  *reinterpret_cast<volatile int*>(address) = value;
}

// Increments every element (graph replay tests count replays with it).
extern "C" __global__ void fk_increment(float* __restrict__ x, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
