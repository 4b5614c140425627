/**
 * What the 2-GPU tests share (tensor-parallel.gpu.test.ts, serve-tp.gpu.test.ts): a tiny Llama (4 heads, 2 kv heads,
 * room for long generations) written as a float32 checkpoint, and the GPU-count guard.
 */
import { CudaRuntime } from '@fastkernels/backend-cuda';
import { baselineRegistry, writeRandomModelCheckpoint } from '@fastkernels/model-zoo';

export const TINY_TP_CONFIG = {
  architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: 256, intermediate_size: 512, num_hidden_layers: 2,
  num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 512, max_position_embeddings: 8192, rms_norm_eps: 1e-5,
  rope_theta: 10000, hidden_act: 'silu', tie_word_embeddings: false, initializer_range: 0.2, torch_dtype: 'float32',
};

/** Write the tiny model (seed 3) into `dir`. */
export function writeTinyTpModel(dir: string): void {
  writeRandomModelCheckpoint(dir, TINY_TP_CONFIG, { registry: baselineRegistry(), seed: 3, dtype: 'f32' });
}

/** Throw (failing the test with the reason) when fewer than n GPUs are visible. */
export function needGpus(n: number): void {
  const visible = CudaRuntime.probe().deviceCount ?? 0;
  if (visible < n) throw new Error(`this test needs ${n} GPUs (${visible} visible)`);
}

/**
 * '' when every request's tokens equal, else one line per differing request: where it first diverges and a few tokens
 * of each side from there (a failing toEqual on 4 x 24 ids prints only the expected side, truncated).
 */
export function tokenDiff(expected: readonly (readonly number[])[], got: readonly (readonly number[])[]): string {
  const lines: string[] = [];
  for (let r = 0; r < Math.max(expected.length, got.length); r++) {
    const a = expected[r] ?? [], b = got[r] ?? [];
    let i = 0;
    while (i < Math.max(a.length, b.length) && a[i] === b[i]) i++;
    if (i < Math.max(a.length, b.length)) lines.push(`request ${r}: first difference at token ${i} of ${a.length}/${b.length}: expected ${JSON.stringify(a.slice(i, i + 6))}, got ${JSON.stringify(b.slice(i, i + 6))}`);
  }
  return lines.join('\n');
}
