/**
 * `--ep N` for generate, e2e and serve (issue 31; vLLM's enable_expert_parallel): expert parallelism over the N ranks
 * of `--tp N`, attention staying tensor-parallel and each rank holding E / N experts of every MoE layer. --ep N alone
 * implies --tp N; another --tp is refused, as is a model without experts (exit 2 naming --ep and the fix). The switch
 * is set process-wide here, before the command's checks and its ranks' model builds (each rank re-parses --ep).
 */
import { UserError } from '@fastkernels/core';
import { loadModelFolderConfig, setExpertParallel } from '@fastkernels/model-zoo';
import { intFlag } from './flags.js';
import { tpFlag } from './tensor-parallel.js';

export const EP_HELP =
  'expert parallelism over the N ranks of --tp N (implies --tp N): attention stays tensor-parallel, each rank holds 1/N of every MoE layer\'s experts (rank r: experts [rE/N, (r+1)E/N)) and their parts are summed by one all-reduce; MoE models only (Mixtral, Qwen3-MoE, gpt-oss)';

/** The expert count of a model folder's config, or undefined for a model without experts. */
function expertCount(dir: string): number | undefined {
  const c = loadModelFolderConfig(dir).config as { numExperts?: unknown; numLocalExperts?: unknown };
  const n = c.numExperts ?? c.numLocalExperts;
  return typeof n === 'number' ? n : undefined;
}

/**
 * Resolve --tp and --ep: the tensor-parallel world the command runs over, expert parallelism switched on when --ep > 1.
 * `models`: the folders the command runs (each must have experts under --ep).
 */
export function resolveParallelFlags(argv: { readonly tp?: number; readonly ep?: number }, models: readonly string[]): number {
  const ep = intFlag('ep', argv.ep ?? 1, 1, 64);
  const tp = tpFlag(argv.tp);
  if (ep === 1) {
    setExpertParallel(false);
    return tp;
  }
  if (tp !== 1 && tp !== ep) {
    throw new UserError(`--ep ${ep} with --tp ${tp}: expert parallelism spans the tensor-parallel ranks, so the sizes must be equal`, { field: '--ep', fix: `use --tp ${ep} --ep ${ep} (or --ep ${ep} alone), or --tp ${tp} --ep ${tp}` });
  }
  for (const dir of models) {
    if (expertCount(dir) === undefined) {
      throw new UserError(`${dir} is a ${loadModelFolderConfig(dir).architecture.name} model: it has no experts to split`, { field: '--ep', fix: `drop --ep (use --tp ${ep} for tensor parallelism), or pass a MoE model (Mixtral, Qwen3-MoE, gpt-oss)` });
    }
  }
  setExpertParallel(true);
  return ep;
}
