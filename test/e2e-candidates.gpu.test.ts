/**
 * `e2e --backend cuda` with the CUDA C++ and PyTorch candidate sets inside the Llama engine (issue 30; tag gpu): the
 * tiny-llama fixture (2 layers; its config imported, as the GPU host has no checkout) with seeded random weights drawn
 * on the device (initializer_range 0.5: clear greedy choices), f32, a small throughput workload.
 *  - examples/candidates/cuda-demo as shipped (--keep-going): rms_norm.cu's compile error is an import drop naming its
 *    line, silu_and_mul.cu (wrong) runs in every layer and is dropped as incorrect; l2_norm.cu and relu.cu (the one
 *    that faults) are deployed but never run — Llama builds neither module.
 *  - rms_norm.cu with its typo fixed: a working .cu in every layer (input, post-attention and final norms), graph
 *    decode on, the tokens agree with the baseline and a speed ratio is reported.
 *  - examples/candidates/torch-demo: rms_norm.py through the worker in every layer; a .py cannot be captured, so
 *    every run (the baseline included) decodes eagerly and the record says why; silu_and_mul.py is dropped.
 * Each test takes well under 2 minutes on an H100 (NVRTC / torch import included). Sets come from the GPU-host bundle
 * (tools/gpu-host-bundle.mjs) when there is one, else the repo. Runs with `dist/gpu-host/run-gpu-tests e2e-candidates`.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { E2eReportSchema, type E2eModelRecord } from '@fastkernels/macroeval';
import { afterAll, describe, expect, it } from 'vitest';
import tinyLlama from '../packages/model-zoo/fixtures/tiny-llama/config.json' with { type: 'json' };
import { ROOT, gpuHostBundle, startCli } from './helpers.js';

const G = { tags: ['gpu'], timeout: 300_000 };
const bundle = gpuHostBundle();
const from = (bundled: string, repo: string) => (bundle && existsSync(join(bundle, bundled)) ? join(bundle, bundled) : join(ROOT, repo));
const CUDA_DEMO = from('examples/cuda-demo', 'examples/candidates/cuda-demo');
const TORCH_DEMO = from('examples/torch-demo', 'examples/candidates/torch-demo');
const tmp = mkdtempSync(join(tmpdir(), 'fk-e2e-candidates-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const MODEL = join(tmp, 'tiny-llama');
mkdirSync(MODEL, { recursive: true });
writeFileSync(join(MODEL, 'config.json'), JSON.stringify({ ...tinyLlama, initializer_range: 0.5 }));

interface E2eRun {
  record: E2eModelRecord;
  deployed: string[];
  stdout: string;
  stderr: string;
}

async function e2e(candidates: string, name: string, extra: string[] = []): Promise<E2eRun> {
  const out = join(tmp, `${name}.json`);
  const details = join(tmp, `${name}-details.json`);
  const args = [
    'e2e', '--model', MODEL, '--candidates', candidates, '--backend', 'cuda', '--workload', 'throughput', '--requests', 'synthetic:8:4-48:8-24:0',
    '--max-num-seqs', '8', '--max-num-batched-tokens', '256', '--max-model-len', '128', '--num-kv-blocks', '64', '--out', out, '--details', details, ...extra,
  ];
  const r = await startCli(args, { timeoutMs: 280_000 }).result;
  if (r.code !== 0) throw new Error(`e2e: exit ${r.code}\n${r.stderr.slice(-3000)}`);
  const record = E2eReportSchema.parse(JSON.parse(readFileSync(out, 'utf8'))).models[0]!;
  const deployed = (JSON.parse(readFileSync(details, 'utf8')) as Record<string, { deployed: string[] }>)['tiny-llama']!.deployed;
  return { record, deployed, stdout: r.stdout, stderr: r.stderr };
}

const drops = (r: E2eRun) => r.record.drops.map((d) => [d.task, d.category]);
const why = (r: E2eRun) => `${r.stdout}\n${r.stderr.slice(-4000)}`;

describe('e2e with CUDA C++ and PyTorch candidates in the Llama engine (GPU)', () => {
  it('cuda-demo as shipped: the compile error and the wrong silu_and_mul are dropped with their categories, the run goes on', G, async () => {
    const r = await e2e(CUDA_DEMO, 'cuda-demo', ['--keep-going']);
    expect(drops(r), why(r)).toEqual([['L1/rms_norm', 'import'], ['L1/silu_and_mul', 'incorrect']]);
    expect(r.record.drops[0]!.detail).toMatch(/rms_norm\.cu:40: identifier "inv_rsm" is undefined/);
    expect(r.deployed).toEqual(['L1/l2_norm', 'L1/relu']); // neither is built by Llama: the faulting relu never runs
    expect(r.record.outcome).toBe('ok');
    expect(r.record.discrepancies.every((d) => d === 0)).toBe(true);
    expect(r.record.asIs?.outcome, 'the as-is run has the wrong silu_and_mul in every layer').toBe('broken');
    expect(r.record.graphs).toBeUndefined(); // .cu candidates are captured
  });

  it('a working .cu (rms_norm.cu with its typo fixed) in every layer: graph decode, tokens agree, a speed ratio', G, async () => {
    const set = join(tmp, 'cuda-rms-norm');
    mkdirSync(join(set, 'L1'), { recursive: true });
    writeFileSync(join(set, 'L1/rms_norm.cu'), readFileSync(join(CUDA_DEMO, 'L1/rms_norm.cu'), 'utf8').replace('v * inv_rsm *', 'v * inv_rms *'));
    cpSync(join(CUDA_DEMO, 'L1/rms_norm.cu.json'), join(set, 'L1/rms_norm.cu.json'));
    const r = await e2e(set, 'cuda-rms-norm');
    expect(r.record.drops, why(r)).toEqual([]);
    expect(r.deployed).toEqual(['L1/rms_norm']);
    expect(r.record.outcome, why(r)).toBe('ok');
    // its own reduction order may round differently from the baseline's: agreement, not bit-identity
    expect(r.record.discrepancies.filter((d) => d === 0).length, why(r)).toBeGreaterThanOrEqual(6);
    expect(r.record.throughputSpeedup).toBeGreaterThan(0);
    expect(r.record.graphs).toBeUndefined();
    expect(r.stderr).toMatch(/CUDA graphs: decode batch sizes 1, 2, 4, 8 captured/);
    expect(r.stdout).toMatch(/tiny-llama: ok, throughput [\d.]+x/);
  });

  it('torch-demo: rms_norm.py through the worker in every layer, eager decode on both sides with the reason, silu_and_mul.py dropped', G, async () => {
    const r = await e2e(TORCH_DEMO, 'torch-demo');
    expect(drops(r), why(r)).toEqual([['L1/silu_and_mul', 'incorrect']]);
    expect(r.deployed).toEqual(['L1/relu', 'L1/rms_norm']); // Llama builds no ReLU: relu.py never runs
    expect(r.record.outcome, why(r)).toBe('ok');
    expect(r.record.discrepancies.filter((d) => d === 0).length, why(r)).toBeGreaterThanOrEqual(6);
    expect(r.record.graphs).toBe(false);
    expect(r.record.graphsReason).toMatch(/L1\/rms_norm: a PyTorch candidate \(runs in its worker process/);
    expect(r.stderr).toMatch(/CUDA graphs off in every run, baseline included/);
    expect(r.stderr).not.toMatch(/CUDA graphs: decode batch sizes/); // no run captured, the baseline's neither
    expect(r.stdout).toMatch(/eager decode on both sides \(L1\/relu: a PyTorch candidate/);
  });
});
