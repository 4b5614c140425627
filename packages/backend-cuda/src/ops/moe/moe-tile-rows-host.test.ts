/**
 * kernels/moe_tile_rows.cu run on the host (test/host-cuda.ts: g++, a CTA's threads as std::threads, warp shuffles
 * through per-warp arrays) with the route's arguments (fused-moe-wgmma-plan.ts), against plain loops: fk_moe_tile_map
 * packs moe_align's blocks of 16 / 32 / 64 into one-expert tiles of 128 rows (Mixtral- and Qwen3-like routings, zero-token
 * experts, adjacent non-local experts whose -1 blocks may share a tile, a run split over the threads' chunks), and
 * fk_moe_gather_rows copies each tile row's token row (zeros for padding) and, through the map, its sorted id.
 * What this cannot see: timing, real warp divergence. Skipped where g++ is absent.
 */
import { Rng } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { alignRouting, randomRouting, withNonLocal, type Alignment } from '../../../test/moe-routing.js';
import { CTA_SHIM, WARP_LANES_SHIM, cArray, hasGxx, runOnHost } from '../../../test/host-cuda.js';
import { moeTileRowsSource, TILE_MAP_THREADS } from './fused-moe-wgmma.js';
import { planFusedMoeWgmma } from './fused-moe-wgmma-plan.js';

const SHIM = `#include <algorithm>
using std::min;
using std::max;
${CTA_SHIM}
${WARP_LANES_SHIM}
`;

interface Case {
  readonly name: string;
  readonly T: number;
  readonly E: number;
  readonly topK: number;
  readonly bs: number;
  readonly nonLocal?: readonly number[];
  /** threads of the tile map's CTA (1024 as launched; fewer puts more blocks in each thread's chunk) */
  readonly threads?: number;
}

const CASES: Case[] = [
  { name: 'Mixtral-like, T 300, bs 64', T: 300, E: 8, topK: 2, bs: 64 },
  { name: 'Mixtral-like, T 300, bs 16, 64 threads (runs across chunks)', T: 300, E: 8, topK: 2, bs: 16, threads: 64 },
  { name: 'Qwen3-like, T 64, top-8 of 32, bs 32', T: 64, E: 32, topK: 8, bs: 32 },
  { name: 'non-local experts 2 and 3 (adjacent) and 6, bs 64', T: 200, E: 8, topK: 2, bs: 64, nonLocal: [2, 3, 6] },
];

/** The packing in plain loops: tiles of G consecutive blocks of one run (a run: a stretch of equal expert ids). */
function tilesOf(al: Alignment, bs: number, mTiles: number): { expert: number[]; block: number[]; post: number } {
  const G = 128 / bs;
  const expert = new Array<number>(mTiles).fill(-1);
  const block = new Array<number>(mTiles * G).fill(-1);
  let t = -1;
  let rs = 0;
  for (let b = 0; b < al.post / bs; b++) {
    if (b === 0 || al.experts[b] !== al.experts[b - 1]) rs = b;
    if ((b - rs) % G === 0) expert[++t] = al.experts[b]!;
    block[t * G + ((b - rs) % G)] = b;
  }
  return { expert, block, post: (t + 1) * 128 };
}

describe(`moe_tile_rows.cu on the host${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  it.skipIf(!hasGxx)('the tile map and the gather = plain loops', () => {
    const K = 16; // two 16-byte pieces a row
    const runs = CASES.map((c, i) => {
      const rng = new Rng(40 + i);
      const ids = randomRouting(rng, c.T, c.E, c.topK);
      let al = alignRouting(ids, c.E, c.bs);
      for (const e of c.nonLocal ?? []) al = withNonLocal(al, e);
      const slots = c.T * c.topK;
      const plan = planFusedMoeWgmma({ M: c.T, topK: c.topK, E: c.E, N: 256, K, P: al.sorted.length, NB: al.experts.length }, 132);
      expect(plan.blocksPerTile).toBe(128 / c.bs);
      return { c, al, slots, plan, want: tilesOf(al, c.bs, plan.mTiles) };
    });
    const src = moeTileRowsSource('fk_moe_tile_map').source;
    let decls = '';
    let body = '';
    runs.forEach(({ c, al, slots, plan }, i) => {
      const G = 128 / c.bs, rows = plan.sortedRows;
      // A [T, K] of 16-bit elements as u32 pairs: element k of row r holds r * 64 + k (as two halves a word)
      const a = Array.from({ length: (c.T * K) / 2 }, (_, w) => {
        const r = Math.floor((w * 2) / K), k = (w * 2) % K;
        return ((r * 64 + k) & 0xffff) | (((r * 64 + k + 1) & 0xffff) << 16);
      });
      decls += `${cArray('unsigned', `a${i}`, a)}\n${cArray('int', `sorted${i}`, al.sorted)}\n${cArray('int', `experts${i}`, al.experts)}\n`;
      decls += `static int post${i}[1] = {${al.post}}, tileExpert${i}[${plan.mTiles}], tileBlock${i}[${plan.mTiles * G}], postTiles${i}[1], sortedTiles${i}[${rows}];\n`;
      decls += `alignas(16) static unsigned aSorted${i}[${(rows * K) / 2}];\n`;
      body += `  std::fill_n(tileExpert${i}, ${plan.mTiles}, -7); std::fill_n(tileBlock${i}, ${plan.mTiles * G}, -7); postTiles${i}[0] = -7;
  std::fill_n(sortedTiles${i}, ${rows}, -7); std::fill_n(aSorted${i}, ${(rows * K) / 2}, 0xdeadbeefu);
  fk_launch_ctas(1, 1, ${c.threads ?? TILE_MAP_THREADS}, [] { fk_moe_tile_map(tileExpert${i}, tileBlock${i}, postTiles${i}, experts${i}, post${i}, ${c.bs}, ${plan.mTiles}); });
  fk_launch_ctas(${rows}, 1, 32, [] { fk_moe_gather_rows((uint4*)aSorted${i}, sortedTiles${i}, (const uint4*)a${i}, sorted${i}, tileBlock${i}, postTiles${i}, ${K / 8}, ${K / 8}, ${c.topK}, ${slots}, ${c.bs}); });
  for (int i = 0; i < ${plan.mTiles}; i++) printf("%d\\n", tileExpert${i}[i]);
  for (int i = 0; i < ${plan.mTiles * G}; i++) printf("%d\\n", tileBlock${i}[i]);
  printf("%d\\n", postTiles${i}[0]);
  for (int i = 0; i < ${rows}; i++) printf("%d\\n", sortedTiles${i}[i]);
  for (int i = 0; i < ${(rows * K) / 2}; i++) printf("%u\\n", aSorted${i}[i]);
`;
    });
    const out = runOnHost(`${SHIM}\n${src}`, `${decls}int main() {\n${body}}`);
    let at = 0;
    for (const { c, al, slots, plan, want } of runs) {
      const G = 128 / c.bs, rows = plan.sortedRows;
      const expert = out.slice(at, (at += plan.mTiles));
      const block = out.slice(at, (at += plan.mTiles * G));
      const post = out[at++]!;
      const sortedTiles = out.slice(at, (at += rows));
      const aSorted = out.slice(at, (at += (rows * K) / 2));
      expect(expert, `${c.name}: tile experts`).toEqual(want.expert);
      expect(block, `${c.name}: tile blocks`).toEqual(want.block);
      expect(post, `${c.name}: post`).toBe(want.post);
      expect(post).toBeLessThanOrEqual(rows);
      // the live rows: each tile part's sorted ids (padding: slots) and its token row (zeros for padding); past post untouched
      for (let p = 0; p < rows; p++) {
        const live = p < post;
        const b = live ? want.block[Math.floor(p / 128) * G + Math.floor((p % 128) / c.bs)]! : -1;
        const id = b >= 0 ? al.sorted[b * c.bs + (p % c.bs)]! : slots;
        expect(sortedTiles[p], `${c.name}: sorted id of row ${p}`).toBe(live ? id : -7);
        for (let w = 0; w < K / 2; w++) {
          const got = aSorted[(p * K) / 2 + w]!;
          if (!live) expect(got).toBe(0xdeadbeef);
          else if (id >= slots) expect(got, `${c.name}: padding row ${p}`).toBe(0);
          else {
            const r = Math.floor(id / c.topK);
            expect(got, `${c.name}: row ${p} word ${w}`).toBe((((r * 64 + 2 * w) & 0xffff) | (((r * 64 + 2 * w + 1) & 0xffff) << 16)) >>> 0);
          }
        }
      }
      // every slot moe_align placed (non-local experts' too: their tiles write zero rows) appears once among the live rows
      const seen = sortedTiles.slice(0, post).filter((v) => v < slots).sort((x, y) => x - y);
      const placed = al.sorted.slice(0, al.post).filter((v) => v < slots).sort((x, y) => x - y);
      expect(seen, `${c.name}: slots`).toEqual(placed);
    }
  }, 120_000);
});
