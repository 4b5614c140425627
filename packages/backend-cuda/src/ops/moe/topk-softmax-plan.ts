/**
 * Launch planning of topk_softmax on CUDA (kernels/moe_topk_softmax.cu): a group of lanes per token row (32, or the
 * power of two covering E below 32, so Mixtral's 8 experts put four rows in a warp), 128-thread CTAs, the logits in
 * registers (E / lanes a lane). What the kernel leaves to the op's decomposition, with the reason: more than
 * TOPK_SOFTMAX_MAX_EXPERTS experts (registers), k past TOPK_SOFTMAX_MAX_K (unrolled rounds). Pure: tested on the CPU.
 */

export const TOPK_SOFTMAX_THREADS = 128;
/** 16 logits a lane: Qwen3-Next's 512 experts. */
export const TOPK_SOFTMAX_MAX_EXPERTS = 512;
/** Every MoE model of the catalog routes to at most 10. */
export const TOPK_SOFTMAX_MAX_K = 32;

export interface TopkSoftmaxPlan {
  /** lanes a row (FK_LANES) */
  readonly lanes: number;
  /** rows a CTA */
  readonly rowsPerCta: number;
  /** CTAs for T rows */
  readonly grid: number;
}

/** The plan for T rows of E experts, top k; a string says why the kernel does not take the call. */
export function planTopkSoftmax(T: number, E: number, k: number): TopkSoftmaxPlan | string {
  if (E > TOPK_SOFTMAX_MAX_EXPERTS) return `${E} experts: past the kernel's ${TOPK_SOFTMAX_MAX_EXPERTS} (logits held in registers)`;
  if (k > TOPK_SOFTMAX_MAX_K) return `top-${k}: past the kernel's ${TOPK_SOFTMAX_MAX_K} unrolled rounds`;
  if (T >= 2 ** 31) return `${T} tokens: past the kernel's 32-bit rows`;
  let lanes = 1;
  while (lanes < Math.min(E, 32)) lanes *= 2;
  const rowsPerCta = TOPK_SOFTMAX_THREADS / lanes;
  return { lanes, rowsPerCta, grid: Math.ceil(T / rowsPerCta) };
}
