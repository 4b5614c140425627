/**
 * The paged MLA decode kernel (mla-decode.ts, kernels/attention_mla_decode.cu) on the GPU vs the float64 CPU backend's
 * paged decode attention with one tensor as both caches: Kimi-Linear-48B's latent rows (32 query heads on one
 * 576-wide row, kv_lora_rank 512 + rope 64) through paged_decode_attention as the model calls it (the route of
 * attention.ts), bs 1 to 64 and context 1 to 4096; the 512-wide value (the op's v_head_dim, as Kimi-Linear calls it,
 * and pagedMlaDecode directly); f16; 40 heads (two head groups); the tiny config's 20-wide rows through the kernel
 * directly (8-byte chunks) and through the op with a narrower value (the whole-row kernel, then a copy); a CUDA graph
 * capture of both the whole row and the op with v_head_dim 512, replayed after seq_lens change on the device. Outputs are poisoned first (an unwritten element shows as NaN). The last describe
 * prints the decode's cache bandwidth at the production shapes (no asserts).
 */
import { F, Rng, Tensor, type DType } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { shuffledBlockTable } from '../../../test/paged-block-table.js';
import { G, cpu, expectClose, gpu, graphMs, measureCopy, poison, printedAfterAll, randCpu, toGpu, tolOf } from '../../../test/spine-helpers.js';
import { pagedMlaDecode } from './mla-decode.js';

interface MlaGpuCase {
  readonly nQ: number;
  readonly D: number;
  readonly dtype: DType;
  readonly lens: readonly number[];
  readonly blockSize?: number;
}

/** q, the latent cache (one kv head) and a shuffled block table on the CPU and the GPU. */
function mlaInputs(c: MlaGpuCase, seed: number) {
  const B = c.lens.length;
  const bs = c.blockSize ?? 16;
  const { bt, numBlocks: NB } = shuffledBlockTable(c.lens, bs, seed);
  const q = randCpu([B, c.nQ, c.D], c.dtype, seed + 1);
  const cache = randCpu([NB, bs, 1, c.D], c.dtype, seed + 2);
  const lens = Tensor.fromArray(cpu(), [...c.lens], [B], 'i32');
  return { cpuIn: [q, cache, bt, lens] as const, gpuIn: [toGpu(q), toGpu(cache), toGpu(bt), toGpu(lens)] as const };
}

/** The float64 CPU reference of bs 64 x up to 4096 keys x 32 heads takes a while. */
const GL = { ...G, timeout: 600_000 };
const SCALE = 1 / Math.sqrt(192); // Kimi-Linear's (qk_nope 128 + qk_rope 64)^-0.5

function checkMla(c: MlaGpuCase, seed = 11): void {
  const { cpuIn, gpuIn } = mlaInputs(c, seed);
  const [q, cache, bt, lens] = cpuIn;
  const expected = cpu().ops.pagedDecodeAttention(q, cache, cache, bt, lens, SCALE, 0);
  poison(expected.numel, expected.numel * 8);
  const [gq, gc, gbt, gl] = gpuIn;
  const out = gpu().ops.pagedDecodeAttention(gq, gc, gc, gbt, gl, SCALE, 0);
  expectClose(out, expected, tolOf(c.dtype), `mla decode ${JSON.stringify({ ...c, lens: c.lens.length > 8 ? `${c.lens.length} lens up to ${Math.max(...c.lens)}` : c.lens })}`);
  for (const t of [out, expected, ...gpuIn, ...cpuIn]) t.dispose();
}

describe('paged MLA decode (one latent kv head, D > 256) vs the float64 CPU backend', () => {
  it('Kimi-Linear-48B rows (32 heads, D 576) bf16 at bs 1: contexts 1, 17, 255, 256, 257, 1000, 4096', GL, () => {
    for (const L of [1, 17, 255, 256, 257, 1000, 4096]) checkMla({ nQ: 32, D: 576, dtype: 'bf16', lens: [L] });
  });
  it('Kimi-Linear-48B rows bf16 at bs 4, 16 and 64 with mixed contexts up to 4096 (empty sequences too)', GL, () => {
    checkMla({ nQ: 32, D: 576, dtype: 'bf16', lens: [1, 4096, 0, 333] });
    const rng = new Rng(5);
    checkMla({ nQ: 32, D: 576, dtype: 'bf16', lens: Array.from({ length: 16 }, () => rng.int(1, 4097)) });
    checkMla({ nQ: 32, D: 576, dtype: 'bf16', lens: Array.from({ length: 64 }, (_, i) => (i === 7 ? 0 : rng.int(1, 4097))) });
  });
  it('f16; 40 heads (two head groups, the second part-filled); 16 heads (one head tile); block size 64', GL, () => {
    checkMla({ nQ: 32, D: 576, dtype: 'f16', lens: [700, 3, 2049] });
    checkMla({ nQ: 40, D: 576, dtype: 'bf16', lens: [700, 3, 2049] });
    checkMla({ nQ: 16, D: 576, dtype: 'bf16', lens: [1500, 31] });
    checkMla({ nQ: 32, D: 576, dtype: 'bf16', lens: [1500, 31, 64], blockSize: 64 });
  });
  it('a 512-wide value (the first 512 dims of each row): the op with v_head_dim 512 (as Kimi-Linear calls it) and pagedMlaDecode', G, () => {
    const c = { nQ: 32, D: 576, dtype: 'bf16' as DType, lens: [2000, 5, 700] };
    const { cpuIn, gpuIn } = mlaInputs(c, 3);
    const [q, cache, bt, lens] = cpuIn;
    const full = cpu().ops.pagedDecodeAttention(q, cache, cache, bt, lens, SCALE, 0);
    const want = full.narrow(2, 0, 512).contiguous();
    const wantOp = F.pagedDecodeAttention(q, cache, cache, bt, lens, { scale: SCALE, v_head_dim: 512 });
    expect(wantOp.toFloat64Array()).toEqual(want.toFloat64Array());
    const [gq, gc, gbt, gl] = gpuIn;
    poison(full.numel, full.numel * 8);
    const viaOp = F.pagedDecodeAttention(gq, gc, gc, gbt, gl, { scale: SCALE, v_head_dim: 512 });
    expect(viaOp.shape).toEqual([3, 32, 512]);
    expectClose(viaOp, want, tolOf('bf16'), 'paged_decode_attention, v_head_dim 512');
    const out = pagedMlaDecode(gpu().ops.spine, ...gpuIn, SCALE, 512);
    expect(out.shape).toEqual([3, 32, 512]);
    expectClose(out, want, tolOf('bf16'), 'mla decode, value 512');
    for (const t of [out, viaOp, full, want, wantOp, ...gpuIn, ...cpuIn]) t.dispose();
  });
  it("the tiny config's rows (4 heads, D 20: the op keeps them on the paged decode kernels) through the MLA kernel directly", G, () => {
    const c = { nQ: 4, D: 20, dtype: 'bf16' as DType, lens: [17, 1, 33, 0, 300] };
    const { cpuIn, gpuIn } = mlaInputs(c, 4);
    const [q, cache, bt, lens] = cpuIn;
    const want = cpu().ops.pagedDecodeAttention(q, cache, cache, bt, lens, 0.3, 0);
    const out = pagedMlaDecode(gpu().ops.spine, ...gpuIn, 0.3);
    expectClose(out, want, tolOf('bf16'), 'mla decode, tiny rows');
    const viaOp = gpu().ops.pagedDecodeAttention(gpuIn[0], gpuIn[1], gpuIn[1], gpuIn[2], gpuIn[3], 0.3, 0);
    expectClose(viaOp, want, tolOf('bf16'), 'paged decode, tiny rows');
    // the tiny config's value width (kv_lora_rank 16 of the 20-wide row): the paged decode kernel, then a copy
    const want16 = F.pagedDecodeAttention(q, cache, cache, bt, lens, { scale: 0.3, v_head_dim: 16 });
    const narrow = F.pagedDecodeAttention(gpuIn[0], gpuIn[1], gpuIn[1], gpuIn[2], gpuIn[3], { scale: 0.3, v_head_dim: 16 });
    expect(narrow.shape).toEqual([5, 4, 16]);
    expectClose(narrow, want16, tolOf('bf16'), 'paged decode, tiny rows, v_head_dim 16');
    for (const t of [out, viaOp, narrow, want, want16, ...gpuIn, ...cpuIn]) t.dispose();
  });
  it('captured in a CUDA graph (the whole row, and the op with v_head_dim 512): replays after seq_lens change on the device give the eager results', GL, () => {
    const c = { nQ: 32, D: 576, dtype: 'bf16' as DType, lens: [4000, 100, 1, 2500] };
    const { cpuIn, gpuIn } = mlaInputs(c, 9);
    const [gq, gc, gbt, gl] = gpuIn;
    const b = gpu();
    const step = () => b.ops.pagedDecodeAttention(gq, gc, gc, gbt, gl, SCALE, 0);
    const step512 = () => F.pagedDecodeAttention(gq, gc, gc, gbt, gl, { scale: SCALE, v_head_dim: 512 });
    step().dispose(); // compile outside the capture
    step512().dispose();
    b.synchronize();
    let out: Tensor | undefined;
    let out512: Tensor | undefined;
    const g = b.runtime.capture(() => {
      out = step();
      out512 = step512();
    }, { poolBytes: 64 << 20 });
    try {
      for (const lens of [[4000, 100, 1, 2500], [17, 4001, 0, 256], [1, 1, 1, 1]]) {
        const t = Tensor.fromArray(cpu(), lens, [4], 'i32');
        const tg = toGpu(t);
        gl.copy_(tg);
        g.replay();
        const want = cpu().ops.pagedDecodeAttention(cpuIn[0], cpuIn[1], cpuIn[1], cpuIn[2], t, SCALE, 0);
        expectClose(out!, want, tolOf('bf16'), `graph replay, lens ${lens.join(',')}`);
        const want512 = F.pagedDecodeAttention(cpuIn[0], cpuIn[1], cpuIn[1], cpuIn[2], t, { scale: SCALE, v_head_dim: 512 });
        expectClose(out512!, want512, tolOf('bf16'), `graph replay, v_head_dim 512, lens ${lens.join(',')}`);
        for (const x of [t, tg, want, want512]) x.dispose();
      }
    } finally {
      g.destroy();
    }
    for (const t of [...gpuIn, ...cpuIn]) t.dispose();
  });
});

describe('paged MLA decode speed (printed, no asserts)', () => {
  const lines = printedAfterAll();
  it('Kimi-Linear-48B decode: bs 1 / 8 / 32 / 64 at 4096, cache bytes read per graph-replayed call', GL, () => {
    const { gbs: copyGBs } = measureCopy(256 * 1024 * 1024);
    lines.push(`mla-decode-speed: copy ${copyGBs.toFixed(0)} GB/s`);
    for (const B of [1, 8, 32, 64]) {
      const c = { nQ: 32, D: 576, dtype: 'bf16' as DType, lens: new Array<number>(B).fill(4096) };
      const { cpuIn, gpuIn } = mlaInputs(c, 1);
      const [gq, gc, gbt, gl] = gpuIn;
      const ms = graphMs(() => gpu().ops.pagedDecodeAttention(gq, gc, gc, gbt, gl, SCALE, 0).dispose(), 10);
      const bytes = B * 4096 * 576 * 2;
      lines.push(`mla-decode-speed: bs ${B} x 4096, 32 heads, D 576: ${(ms * 1000).toFixed(1)} us, ${(bytes / ms / 1e6).toFixed(0)} GB/s of cache`);
      for (const t of [...gpuIn, ...cpuIn]) t.dispose();
    }
  });
});
