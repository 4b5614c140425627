import { hostArray, type HostArray, type Tensor } from '@fastkernels/core';

/**
 * FlashInfer's trtllm-gen paged KV cache as one tensor in the HND layout: [num_pages, 2, num_kv_heads, page_size,
 * head_dim] (K at index 0 of dim 1, V at 1). Our paged kernels read NHD [num_blocks, block_size, num_kv_heads,
 * head_dim] caches, so the baselines copy each half into that layout per call: a full-cache transpose that a candidate
 * reading HND pages directly does not pay.
 */
export function nhdCachesOf(kvCache: Tensor): [Tensor, Tensor] {
  return [0, 1].map((half) => {
    const hnd = kvCache.select(1, half);
    const nhd = hnd.permute(0, 2, 1, 3);
    const dense = nhd.contiguous();
    hnd.dispose();
    nhd.dispose();
    return dense;
  }) as [Tensor, Tensor];
}

/** FlashInfer's window_left (keys with pos - j <= window_left are seen; -1 = all) as our ops' sliding window. */
export const slidingWindowOfLeft = (windowLeft: number): number => (windowLeft < 0 ? 0 : windowLeft + 1);

/** Float64: the K (half 0) or V (half 1) cache of an HND kv_cache, re-indexed to NHD [pages, page_size, heads, dim]. */
export function nhdHalfReference(kvCache: HostArray, half: 0 | 1): HostArray {
  const [P, , H, S, D] = kvCache.shape as [number, number, number, number, number];
  const out = hostArray([P, S, H, D]);
  for (let p = 0; p < P; p++) {
    for (let h = 0; h < H; h++) {
      for (let s = 0; s < S; s++) {
        const src = ((((p * 2 + half) * H + h) * S + s) * D);
        out.data.set(kvCache.data.subarray(src, src + D), ((p * S + s) * H + h) * D);
      }
    }
  }
  return out;
}
