import { describe, expect, it } from 'vitest';
import { PREFETCH_TUNING, prefetchBlocks, prefetchBytes } from './prefetch.js';

describe('the weight prefetch launch (no GPU)', () => {
  it('off until measured', () => {
    expect(PREFETCH_TUNING.mode).toBe(process.env.FASTKERNELS_L2_PREFETCH || 'off');
  });
  it('bytes: the weight, capped at maxMiB, rounded down to the 16-byte unit of the bulk prefetch', () => {
    expect(prefetchBytes(4096 * 4096 * 2)).toBe(32 << 20); // Llama-3-8B's o_proj, whole
    expect(prefetchBytes(128256 * 4096 * 2)).toBe(PREFETCH_TUNING.maxMiB << 20);
    expect(prefetchBytes(1000, { ...PREFETCH_TUNING, maxMiB: 1 })).toBe(992);
    expect(prefetchBytes(15)).toBe(0);
  });
  it('blocks: one chunk a thread, at most one block an SM, at least one', () => {
    const t = { ...PREFETCH_TUNING, chunkBytes: 16384, threads: 32 };
    expect(prefetchBlocks(32 << 20, 132, t)).toBe(64); // 2048 chunks / 32 threads
    expect(prefetchBlocks(40 << 20, 132, t)).toBe(80);
    expect(prefetchBlocks(400 << 20, 132, t)).toBe(132);
    expect(prefetchBlocks(16, 132, t)).toBe(1);
  });
});
