/**
 * What the fused_moe_gemm GPU tests share (fused-moe.gpu.test.ts: the mma.sync kernel; fused-moe-wgmma.gpu.test.ts:
 * the Hopper route): one call's inputs on both backends against the float64 CPU op, and a CUDA graph replayed over new
 * routing written into the captured buffers.
 */
import { F, Rng, Tensor, type DType } from '@fastkernels/core';
import { cpu, expectClose, gpu, intsCpu, randCpu, toGpu, tolOf } from './spine-helpers.js';
import { alignRouting, randomRouting, withNonLocal, type Alignment } from './moe-routing.js';

type Keep = <T extends Tensor>(t: T) => T;
/** fused_moe_gemm's tensor inputs: x, w, topk_weights, sorted_token_ids, expert_ids, num_tokens_post_padded. */
export type FusedMoeInputs = readonly [Tensor, Tensor, Tensor, Tensor, Tensor, Tensor];

/** A call's shape and routing: M tokens, top-k of E experts, an [N, K] weight an expert, moe_align blocks of bs. */
export interface FusedMoeShape {
  readonly M: number;
  readonly topK: number;
  readonly E: number;
  readonly N: number;
  readonly K: number;
  readonly bs: number;
  readonly mul: boolean;
  /** this expert's blocks marked -1 (non-local under expert parallelism: zero rows) */
  readonly nonLocal?: number;
  /** route only to these experts (fewer hit experts draw fewer host weights) */
  readonly allowed?: readonly number[];
}

/**
 * One call's inputs: random routing aligned to blocks of bs, the float64 CPU op's output (its weight holds only the hit
 * experts) and the GPU inputs, whose weight holds every expert, NaN where unread, so a block that reads the wrong
 * expert shows.
 */
export function fusedMoeCase(keep: Keep, c: FusedMoeShape, dtype: DType, seed: number): { cpuOut: Tensor; gIn: FusedMoeInputs; attrs: { top_k: number; mul_routed_weight: boolean } } {
  const rng = new Rng(seed);
  let al: Alignment = alignRouting(randomRouting(rng, c.M, c.E, c.topK, c.allowed), c.E, c.bs);
  if (c.nonLocal !== undefined) al = withNonLocal(al, c.nonLocal);
  const hit = [...new Set(al.experts.filter((e) => e >= 0))].sort((a, b) => a - b);
  const compact = new Map(hit.map((e, i) => [e, i] as const));
  const x = keep(randCpu([c.M, c.K], dtype, seed + 1));
  const wHit = keep(randCpu([Math.max(1, hit.length), c.N, c.K], dtype, seed + 2, 1 / Math.sqrt(c.K)));
  const tw = keep(Tensor.fromArray(cpu(), Array.from({ length: c.M * c.topK }, () => 0.1 + rng.uniform()), [c.M, c.topK], 'f32'));
  const ints = (v: number[]) => keep(intsCpu(v, [v.length], 'i32'));
  const attrs = { top_k: c.topK, mul_routed_weight: c.mul };
  const cpuOut = keep(F.fusedMoeGemm(x, wHit, tw, ints(al.sorted), ints(al.experts.map((e) => (e < 0 ? -1 : compact.get(e)!))), ints([al.post]), attrs));

  const wGpu = keep(Tensor.empty(gpu(), [c.E, c.N, c.K], dtype));
  wGpu.fill_(NaN);
  const wHitGpu = keep(toGpu(wHit));
  hit.forEach((e, i) => {
    const [dst, src] = [wGpu.select(0, e), wHitGpu.select(0, i)];
    dst.copy_(src);
    dst.dispose();
    src.dispose();
  });
  const gIn = [keep(toGpu(x)), wGpu, keep(toGpu(tw)), keep(toGpu(ints(al.sorted))), keep(toGpu(ints(al.experts))), keep(toGpu(ints([al.post])))] as const;
  return { cpuOut, gIn, attrs };
}

/** A graph replay's shape (bf16, routed weights on); `secondAllowed`, the experts the second routing may choose. */
export interface GraphReplayShape extends Pick<FusedMoeShape, 'M' | 'topK' | 'E' | 'N' | 'K' | 'bs'> {
  readonly seed: number;
  readonly secondAllowed: readonly number[];
  readonly poolBytes: number;
}

/**
 * fused_moe_gemm captured in a CUDA graph, then replayed over a second routing and the first again, each copied into
 * the captured routing buffers (no host read of the routing): every replay = a fresh call over that routing.
 * `afterWarmup` runs after the call that compiles the kernels, before the capture (a route check).
 */
export function checkGraphReplay(keep: Keep, g: GraphReplayShape, afterWarmup: () => void = () => {}): void {
  const { M, topK, E, N, K, bs } = g;
  const rng = new Rng(g.seed);
  const x = keep(randCpu([M, K], 'bf16', 3));
  const w = keep(randCpu([E, N, K], 'bf16', 4, 1 / Math.sqrt(K)));
  const tw = keep(Tensor.fromArray(cpu(), Array.from({ length: M * topK }, () => rng.uniform()), [M, topK], 'f32'));
  const route = (ids: number[]) => {
    const a = alignRouting(ids, E, bs);
    return [a.sorted, a.experts, [a.post]].map((v) => keep(intsCpu(v, [v.length], 'i32')));
  };
  const first = route(randomRouting(rng, M, E, topK));
  const second = route(randomRouting(rng, M, E, topK, g.secondAllowed));
  const gIn = [keep(toGpu(x)), keep(toGpu(w)), keep(toGpu(tw)), ...first.map((t) => keep(toGpu(t)))] as unknown as FusedMoeInputs;
  const attrs = { top_k: topK, mul_routed_weight: true };
  keep(F.fusedMoeGemm(...gIn, attrs)); // compiles before the capture
  afterWarmup();
  const rt = gpu().runtime;
  let out: Tensor | undefined;
  const graph = rt.capture(() => {
    out = F.fusedMoeGemm(...gIn, attrs);
  }, { poolBytes: g.poolBytes });
  try {
    for (const routing of [second, first]) {
      routing.forEach((t, i) => gIn[3 + i]!.copy_(keep(toGpu(t))));
      graph.replay();
      const want = keep(F.fusedMoeGemm(x, w, tw, routing[0]!, routing[1]!, routing[2]!, attrs));
      expectClose(out!, want, tolOf('bf16'), 'graph replay');
    }
  } finally {
    out?.dispose();
    graph.destroy();
  }
}
