// A fake libcuda for src/tensor-map-native.test.ts: cuTensorMapEncodeTiled records what it was asked in the map's bytes
// (so the test reads back exactly what the addon passed), and fails as the driver does on an unaligned address. The
// test compiles it with a stub of every other entry the addon resolves (from addon.cc's FK_DRIVER_FUNCS list), which
// are never called. -DFAKE_NO_TMA leaves cuTensorMapEncodeTiled out (a driver before CUDA 12.0).
#include <cstring>

#ifndef FAKE_NO_TMA
// The record, in the map's 16 u64 words: [0] magic, [1] data type, [2] rank, [3] address, [4..8] dims, [9..12] strides
// (bytes), [13] box (12 bits a dim), [14] element strides (4 bits a dim), [15] interleave | swizzle << 8 |
// l2 promotion << 16 | oob fill << 24.
extern "C" int cuTensorMapEncodeTiled(unsigned long long* map, int dataType, unsigned rank, void* address, const unsigned long long* dims,
                                      const unsigned long long* strides, const unsigned* box, const unsigned* elementStrides, int interleave,
                                      int swizzle, int l2Promotion, int oobFill) {
  if (reinterpret_cast<unsigned long long>(address) % 16 != 0) return 1;  // CUDA_ERROR_INVALID_VALUE
  std::memset(map, 0, 128);
  map[0] = 0x544d41505f464bull;  // "FK_PAMT"
  map[1] = static_cast<unsigned long long>(dataType);
  map[2] = rank;
  map[3] = reinterpret_cast<unsigned long long>(address);
  for (unsigned i = 0; i < rank && i < 5; i++) {
    map[4 + i] = dims[i];
    if (i + 1 < rank) map[9 + i] = strides[i];
    map[13] |= static_cast<unsigned long long>(box[i] & 0xfff) << (12 * i);
    map[14] |= static_cast<unsigned long long>(elementStrides[i] & 0xf) << (4 * i);
  }
  map[15] = static_cast<unsigned long long>(interleave) | static_cast<unsigned long long>(swizzle) << 8 |
            static_cast<unsigned long long>(l2Promotion) << 16 | static_cast<unsigned long long>(oobFill) << 24;
  return 0;
}
#endif
