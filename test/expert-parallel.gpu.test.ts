/**
 * Expert parallelism on 2 GPUs (issue 31; tag gpu): `generate --ep 2` gives the greedy tokens of one GPU in float32
 * for a tiny Mixtral, Qwen3-MoE and gpt-oss (attention tensor-parallel, 4 of 8 / 8 of 16 experts per rank, the experts'
 * parts all-reduced), and `e2e --ep 2 --self-test` is ok with 100% agreement (the paged engine, decode graphs captured
 * with the MoE all-reduce in them, or a logged fallback). The CPU version with threads as ranks: expert-parallel.test.ts.
 * Run: `FASTKERNELS_GPU=1 npx vitest run test/expert-parallel.gpu.test.ts` (or the bundle's
 * `dist/gpu-host/run-gpu-tests expert-parallel`).
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { baselineRegistry, writeRandomModelCheckpoint } from '@fastkernels/model-zoo';
import { startCli } from './helpers.js';
import { needGpus, tokenDiff } from './tp/gpu-fixture.js';

const G = { tags: ['gpu'], timeout: 600_000 };
const COMMON = { hidden_size: 256, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 512, max_position_embeddings: 8192, rms_norm_eps: 1e-5, rope_theta: 10000, hidden_act: 'silu', tie_word_embeddings: false, initializer_range: 0.2, torch_dtype: 'float32' };
const MODELS = {
  mixtral: { ...COMMON, architectures: ['MixtralForCausalLM'], model_type: 'mixtral', intermediate_size: 384, num_local_experts: 8, num_experts_per_tok: 2 },
  // the CPU fixture (dense experts, sinks, biases, YaRN, a sliding layer), its weights drawn here
  gpt_oss: JSON.parse(readFileSync(join(import.meta.dirname, '..', 'packages', 'model-zoo', 'fixtures', 'tiny-gpt-oss', 'config.json'), 'utf8')) as Record<string, unknown>,
  qwen3_moe: { ...COMMON, architectures: ['Qwen3MoeForCausalLM'], model_type: 'qwen3_moe', head_dim: 64, intermediate_size: 512, moe_intermediate_size: 128, num_experts: 16, num_experts_per_tok: 4, norm_topk_prob: true, decoder_sparse_step: 1, mlp_only_layers: [] },
};

let work: string;
let prompts: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'fk-ep-gpu-'));
  for (const [name, raw] of Object.entries(MODELS)) writeRandomModelCheckpoint(join(work, name), raw, { registry: baselineRegistry(), seed: 3, dtype: 'f32' });
  prompts = join(work, 'prompts.jsonl');
  writeFileSync(prompts, [[1, 2, 3, 4, 5], [9, 8, 7], [100, 200, 300, 400], [42]].map((p) => JSON.stringify({ prompt_ids: p })).join('\n') + '\n');
});

describe('generate --ep 2 on 2 GPUs', () => {
  for (const name of Object.keys(MODELS)) {
    it(`${name}: --ep 2 gives the greedy tokens of one GPU (float32, 4 prompts x 32 tokens)`, G, async () => {
      needGpus(2);
      const args = ['generate', '--model', join(work, name), '--prompt-file', prompts, '--max-tokens', '32', '--backend', 'cuda', '--dtype', 'f32', '--json'];
      const one = await startCli(args, { timeoutMs: 300_000 }).result;
      expect(one.code, one.stderr).toBe(0);
      const two = await startCli([...args, '--ep', '2'], { timeoutMs: 300_000 }).result;
      expect(two.code, two.stderr).toBe(0);
      const [a, b] = [JSON.parse(one.stdout), JSON.parse(two.stdout)]; // only rank 0 printed
      expect(b.tp).toBe(2);
      const diff = tokenDiff(a.outputs.map((o: { token_ids: number[] }) => o.token_ids), b.outputs.map((o: { token_ids: number[] }) => o.token_ids));
      expect(diff, `${diff}\n--ep 2 log:\n${two.stderr.split('\n').slice(-15).join('\n')}`).toBe('');
    });
  }
});

describe('e2e --ep 2 on 2 GPUs', () => {
  it('mixtral --self-test: outcome ok, 100% agreement, one report (rank 0), decode graphs or a logged fallback', G, async () => {
    needGpus(2);
    const out = join(work, 'e2e-ep2.json');
    const r = await startCli([
      'e2e', '--model', join(work, 'mixtral'), '--self-test', '--backend', 'cuda', '--dtype', 'f32', '--ep', '2', '--requests', 'synthetic:8:4-32:4-16:0',
      '--latency-batch-sizes', '1,4', '--latency-prompt', '16', '--latency-output', '8', '--warmups', '1', '--repeats', '1',
      '--max-model-len', '256', '--max-num-seqs', '8', '--num-kv-blocks', '64', '--out', out,
    ], { timeoutMs: 500_000 }).result;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    expect(r.stdout).toMatch(/: ok, .*exact agreement 8\/8/);
    expect(r.stderr).toMatch(/CUDA graphs: (decode batch sizes .* captured|off under tensor parallelism \(.+\))/);
    const report = JSON.parse(readFileSync(out, 'utf8'));
    expect(report.models[0].outcome).toBe('ok');
  });
});
