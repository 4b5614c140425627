// Paged KV-cache slot addressing (vLLM reshape_and_cache_flash), shared by fk_store_kvcache (kvcache.cu) and
// fk_rotary_store_kv (rotary.cu) so both write a token to the same place: slot = block * blockSize + offset.
#pragma once
// false for padding (slot < 0) and for a slot past the cache (slot >= capacity = numBlocks * blockSize: *flag is set
// when flag is not null); else the slot's block and offset.
__device__ __forceinline__ bool fk_kv_slot(long long slot, int blockSize, long long capacity, int* flag, long long& blk, long long& off) {
  if (slot >= capacity) {
    if (flag && threadIdx.x == 0) atomicExch(flag, 1);
    return false;
  }
  if (slot < 0) return false;
  blk = slot / blockSize;
  off = slot - blk * blockSize;
  return true;
}
