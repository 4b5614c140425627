/**
 * The paged MLA decode kernel (kernels/attention_mla_decode.cu, as embedded) replayed on the host: its real source built
 * with FK_HOST_REPLAY=1 by g++ (test/host-cuda.ts: a CTA's 256 threads as std::threads), the tensor-core primitives
 * emulated lane by lane (test/warp-mma-host.ts: mma.sync m16n8k16 and ldmatrix fragment layouts as the PTX ISA gives
 * them, bf16 as bits), on the launch geometry the plan makes or a forced split size. Its direct outputs and, for split
 * sequences, its fp32 partials merged as attention_decode.cu's fk_paged_decode_combine merges them (transcribed below),
 * are held to the float64 CPU paged_decode_attention with the same value width (its v_head_dim) over the same
 * bf16-rounded inputs: Kimi-Linear-48B's 576-wide rows (value 512 as the model asks, and the whole row), head groups with padding heads, the tiny config's 20-wide rows (8-byte
 * chunks), odd and empty sequences, several blocks a sequence, shuffled pages, several splits. What it cannot see:
 * races between warps, f16, timing. Skipped where g++ is absent.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor, callOp1 } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cArray, hasGxx, runOnHost } from '../../../test/host-cuda.js';
import { warpMmaHostShim } from '../../../test/warp-mma-host.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import { MLA_THREADS, mlaSharedBytes, planMlaDecode } from './mla-decode-plan.js';

const cpu = new CpuBackend();

interface MlaCase {
  readonly name: string;
  readonly nQ: number;
  readonly D: number;
  readonly DV: number;
  readonly blockSize: number;
  readonly lens: number[];
  /** Keys per split; absent: the plan's (with `multiprocessors` SMs). */
  readonly chunk?: number;
  readonly multiprocessors?: number;
  readonly chunkBytes: 16 | 8 | 4;
}

const CASES: MlaCase[] = [
  { name: 'Kimi-48B rows (D 576, value 576: the op without v_head_dim), 32 heads, plan splits', nQ: 32, D: 576, DV: 576, blockSize: 16, lens: [1, 77, 300], multiprocessors: 12, chunkBytes: 16 },
  { name: 'D 576, value 512 (v_head_dim, as Kimi-Linear calls the op), 32 heads, 64-key splits', nQ: 32, D: 576, DV: 512, blockSize: 16, lens: [130, 33, 0], chunk: 64, chunkBytes: 16 },
  { name: 'D 576, 40 heads (two head groups, padding heads), 48-key splits, block size 32', nQ: 40, D: 576, DV: 576, blockSize: 32, lens: [97, 5], chunk: 48, chunkBytes: 16 },
  { name: 'D 320, 16 heads (one head tile), one split', nQ: 16, D: 320, DV: 288, blockSize: 8, lens: [45, 64, 1], chunk: 4096, chunkBytes: 16 },
  { name: 'tiny config rows (D 20: 4 heads, 8-byte chunks), 32-key splits', nQ: 4, D: 20, DV: 20, blockSize: 4, lens: [0, 5, 33, 70], chunk: 32, chunkBytes: 8 },
];

const bf16 = (x: number) => {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer);
  u[0] = (u[0]! + 0x7fff + ((u[0]! >> 16) & 1)) & 0xffff0000;
  return f[0]!;
};
const bits = (x: number) => new Uint32Array(new Float32Array([x]).buffer)[0]! >>> 16;

/** fk_paged_decode_combine's merge of one row's splits (max, then the weighted sums, times 1 / sum). */
function combine(part: Float64Array, ml: Float64Array, row: number, n: number, splits: number, DV: number): number[] {
  let M = -Infinity;
  for (let s = 0; s < n; s++) M = Math.max(M, ml[(row * splits + s) * 2]!);
  const mb = M === -Infinity ? 0 : M;
  let sum = 0;
  for (let s = 0; s < n; s++) sum += 2 ** (ml[(row * splits + s) * 2]! - mb) * ml[(row * splits + s) * 2 + 1]!;
  const inv = sum > 0 ? 1 / sum : 0;
  return Array.from({ length: DV }, (_, d) => {
    let a = 0;
    for (let s = 0; s < n; s++) a += 2 ** (ml[(row * splits + s) * 2]! - mb) * part[(row * splits + s) * DV + d]!;
    return a * inv;
  });
}

describe(`fk_paged_mla_decode replayed on the host${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  CASES.forEach((c, n) => {
    it.skipIf(!hasGxx)(c.name, { timeout: 600_000 }, () => {
      const rng = new Rng(700 + n);
      const B = c.lens.length;
      const maxBlocks = Math.max(1, ...c.lens.map((l) => Math.ceil(l / c.blockSize))) + 1; // a spare column
      const numBlocks = B * maxBlocks + 3;
      const scale = 1 / Math.sqrt(192);
      const q = rng.fillNormal(B * c.nQ * c.D).map(bf16);
      const cache = rng.fillNormal(numBlocks * c.blockSize * c.D).map(bf16);
      // every sequence's pages drawn without repeats from a shuffled pool
      const pool = Array.from({ length: numBlocks }, (_, i) => i);
      for (let i = pool.length - 1; i > 0; i--) {
        const j = rng.int(0, i + 1);
        [pool[i], pool[j]] = [pool[j]!, pool[i]!];
      }
      const bt = Array.from({ length: B * maxBlocks }, (_, i) => pool[i]!);
      const heads = c.nQ > 16 ? 2 : 1;
      const plan = planMlaDecode({ batch: B, qHeads: c.nQ, headDim: c.D, blockSize: c.blockSize, maxBlocks, multiprocessors: c.multiprocessors ?? 132 });
      expect(plan).not.toBeNull();
      const capacity = maxBlocks * c.blockSize;
      const chunk = c.chunk ?? plan!.chunk;
      const splits = Math.ceil(capacity / chunk);
      if (c.multiprocessors) expect(splits, 'the plan splits this case').toBeGreaterThan(1);
      const groups = Math.ceil(c.nQ / (16 * heads));
      const smem = mlaSharedBytes(c.D, heads, 3); // the replay's build: FK_STAGES 3
      expect(smem).toBeLessThanOrEqual(1 << 18);

      const tq = Tensor.fromArray(cpu, q, [B, c.nQ, c.D], 'f64');
      const tc = Tensor.fromArray(cpu, cache, [numBlocks, c.blockSize, 1, c.D], 'f64');
      const tbt = Tensor.fromArray(cpu, bt, [B, maxBlocks], 'i32');
      const tl = Tensor.fromArray(cpu, c.lens, [B], 'i32');
      const want = callOp1('paged_decode_attention', [tq, tc, tc, tbt, tl, null], { scale, v_head_dim: c.DV }).toFloat64Array();
      expect(want.length).toBe(B * c.nQ * c.DV);

      const defines = [
        ['FK_HOST_REPLAY', 1], ['FK_T', '__nv_bfloat16'], ['FK_MLA_D', c.D], ['FK_MLA_DV', c.DV], ['FK_MLA_MT', heads], ['FK_STAGES', 3],
        ['FK_BS', c.blockSize], ['FK_MLA_CB', c.chunkBytes],
      ].map(([k, v]) => `#define ${k} ${v}`).join('\n');
      const source = `${defines}\n${warpMmaHostShim('fkmla', MLA_THREADS)}\n${KERNEL_SOURCES['attention_mla_decode.cu']!}`;
      const rows = B * c.nQ;
      const main = `${cArray('unsigned short', 'q', Array.from(q, bits))}
${cArray('unsigned short', 'cache', Array.from(cache, bits))}
${cArray('int', 'bt', bt)}
${cArray('int', 'lens', c.lens)}
static __nv_bfloat16 out[${rows * c.DV}];
static float part_acc[${rows * splits * c.DV}];
static float part_ml[${rows * splits * 2}];
int main() {
  for (int i = 0; i < ${rows * c.DV}; i++) out[i].x = 0x7fc0;  // NaN: a row the kernel should have written and did not
  for (int i = 0; i < ${rows * splits * 2}; i++) part_ml[i] = NAN;
  fk_smem_poison(${smem});
  fk_launch({${splits}, ${groups}, ${B}}, ${MLA_THREADS}, [] {
    fk_paged_mla_decode(out, part_acc, part_ml, (const __nv_bfloat16*)q, ${c.nQ * c.D}LL, ${c.D}LL, (const __nv_bfloat16*)cache, ${c.blockSize * c.D}LL, ${c.D}LL,
                        bt, ${maxBlocks}LL, ${maxBlocks}, lens, ${c.nQ}, ${scale * Math.LOG2E}f, ${chunk}, ${splits});
  });
  printf("%ld\\n", fk_smem_overrun(${smem}));
  for (int i = 0; i < ${rows * c.DV}; i++) printf("%.9g\\n", (double)fk_bf16_float(out[i].x));
  for (int i = 0; i < ${rows * splits * c.DV}; i++) printf("%.9g\\n", (double)part_acc[i]);
  for (int i = 0; i < ${rows * splits * 2}; i++) printf("%.9g\\n", (double)part_ml[i]);
}`;
      const [overrun, ...got] = runOnHost(source, main);
      expect(overrun, 'shared memory written past mlaSharedBytes (a GPU faults there)').toBe(0);
      const outDirect = got.slice(0, rows * c.DV);
      const part = Float64Array.from(got.slice(rows * c.DV, rows * c.DV + rows * splits * c.DV));
      const ml = Float64Array.from(got.slice(rows * c.DV + rows * splits * c.DV));
      let worst = 0;
      let merged = 0;
      for (let b = 0; b < B; b++) {
        const nsp = Math.min(splits, Math.ceil(Math.min(c.lens[b]!, capacity) / chunk));
        for (let h = 0; h < c.nQ; h++) {
          const row = b * c.nQ + h;
          // as the combine kernel: a row over more than one split is merged from the partials, else the kernel wrote it
          const vals = splits > 1 && nsp > 1 ? combine(part, ml, row, nsp, splits, c.DV) : outDirect.slice(row * c.DV, (row + 1) * c.DV);
          if (splits > 1 && nsp > 1) merged++;
          for (let d = 0; d < c.DV; d++) {
            const w = want[row * c.DV + d]!;
            const e = Math.abs(vals[d]! - w) / (1e-2 + 1e-2 * Math.abs(w));
            if (!(e <= worst)) worst = Number.isNaN(e) ? Infinity : Math.max(worst, e);
          }
        }
      }
      if (splits > 1 && c.lens.some((l) => l > chunk)) expect(merged, 'rows merged from partials').toBeGreaterThan(0);
      expect(worst, `${c.name}: worst error / tolerance (splits ${splits}, chunk ${chunk})`).toBeLessThanOrEqual(1);
      for (const t of [tq, tc, tbt, tl]) t.dispose();
    });
  });
});
