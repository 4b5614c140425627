// bench/suites/decode-profile/decode-profile-lib.mjs: the post-processing of bench/suites/decode-profile/run.sh (ncu CSV -> kernels per decode
// step, per-kernel time, the gap to the measured step time, GEMM bandwidth), on synthetic ncu output.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  GEMM_GROUP, aggregateSteps, analyzeDecodeProfile, findPeriod, formatTable, gemmRoles, isGemmName, kernelGroup, llamaGemmWeights, parseNcuCsv, shortName,
} from '../bench/suites/decode-profile/decode-profile-lib.mjs';

const LIB = resolve(import.meta.dirname, '../bench/suites/decode-profile/decode-profile-lib.mjs');
const HEAD = ['ID', 'Process ID', 'Process Name', 'Host Name', 'Kernel Name', 'Context', 'Stream', 'Block Size', 'Grid Size', 'Device', 'CC', 'gpu__time_duration.sum'];
const q = (xs: readonly (string | number)[]) => xs.map((x) => `"${String(x).replace(/"/g, '""')}"`).join(',');

/** An ncu `--csv --page raw` text: ==PROF== noise, header, units row, one row per launch (durations in `unit`). */
function ncuCsv(launches: readonly [string, number][], unit = 'nsecond'): string {
  const lines = ['==PROF== Connected to process 4242 (node)', '==PROF== Disconnected from process 4242', q(HEAD), q([...HEAD.slice(0, -1).map(() => ''), unit])];
  launches.forEach(([name, dur], i) => lines.push(q([i + 1, 4242, 'node', '127.0.0.1', name, 1, 7, '(256, 1, 1)', '(132, 1, 1)', 0, '9.0', dur])));
  return lines.join('\n') + '\n';
}

const CUTLASS = 'void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x1_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x1_tn_align8::Params)';
const XMMA = 'sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas';
// one decode step: 5 launches, durations in ns (-> 10 + 100 + 5 + 200 + 20 = 335 us)
const STEP: [string, number][] = [['fk_embedding', 10_000], [XMMA, 100_000], ['fk_rms_norm', 5_000], [CUTLASS, 200_000], ['fk_sampler_argmax', 20_000]];
const WARMUP: [string, number][] = [
  ['fk_fill_random', 1_000], ['fk_varlen_prefill', 50_000], [XMMA, 7_000], ['fk_rotary', 3_000], ['fk_store_kvcache', 2_000],
  // an eager decode with other durations (the warm-up before capture): must not count
  ...STEP.map(([n]): [string, number] => [n, 999_000]),
  ['fk_silu_and_mul', 4_000], ['fk_rms_norm', 6_000],
];
const launches: [string, number][] = [...WARMUP, ...Array.from({ length: 8 }, () => STEP).flat()];

describe('decode-profile post-processing', () => {
  it('parses ncu raw CSV in launch order, with units and thousands separators', () => {
    const ks = parseNcuCsv(ncuCsv(launches));
    expect(ks).toHaveLength(WARMUP.length + 40);
    expect(ks[0]).toEqual({ id: 1, name: 'fk_fill_random', us: 1 });
    expect(ks.at(-1)!.us).toBeCloseTo(20);
    // ncu-scaled units and "1,234.5"; rows out of ID order come back sorted
    const text = [q(HEAD), q([...HEAD.slice(0, -1).map(() => ''), 'usecond']), q([2, 1, 'node', 'h', 'fk_b', 1, 7, '', '', 0, '9.0', '1,234.5']), q([1, 1, 'node', 'h', 'fk_a', 1, 7, '', '', 0, '9.0', '2'])].join('\n');
    expect(parseNcuCsv(text)).toEqual([{ id: 1, name: 'fk_a', us: 2 }, { id: 2, name: 'fk_b', us: 1234.5 }]);
    expect(() => parseNcuCsv('==PROF== nothing profiled\n')).toThrow(/no ncu CSV header/);
  });

  it('finds K = kernels per step as the period at the end of the launch list', () => {
    const names = parseNcuCsv(ncuCsv(launches)).map((k) => k.name);
    expect(findPeriod(names, 8)).toEqual({ K: 5, reps: 8 });
    // the first of the 8 steps differs: 7 repetitions are still found
    const broken = [...names];
    broken[names.length - 40] = 'fk_other';
    expect(findPeriod(broken, 8)).toEqual({ K: 5, reps: 7 });
    expect(findPeriod(['a', 'b', 'c', 'd'], 3)).toBeNull();
    // a step that repeats a sub-pattern (layers) is not cut short: the step is the smallest whole period
    const layered = ['emb', 'n', 'g', 'n', 'g', 'head'];
    expect(findPeriod(['x', ...Array.from({ length: 4 }, () => layered).flat()], 4)).toEqual({ K: 6, reps: 4 });
  });

  it('groups cuBLASLt kernels into one GEMM bucket and ours by name', () => {
    expect(shortName(CUTLASS)).toBe('cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x1_tn_align8>');
    expect(shortName('fk_rms_norm')).toBe('fk_rms_norm');
    expect(kernelGroup(CUTLASS)).toBe(GEMM_GROUP);
    expect(kernelGroup(XMMA)).toBe(GEMM_GROUP);
    expect(kernelGroup('void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>(cublasSplitKParams<float>)')).toBe(GEMM_GROUP);
    expect(kernelGroup('fk_paged_decode_mma')).toBe('fk_paged_decode_mma');
    expect(isGemmName('fk_rms_norm')).toBe(false);
    expect(isGemmName(XMMA)).toBe(true);
  });

  it('aggregates the last steps: count, us per step, shares, and the gap to the step time', () => {
    const ks = parseNcuCsv(ncuCsv(launches));
    const { perKernel, kernelSumUs } = aggregateSteps(ks, 5, 8, { stepMs: 0.4 });
    expect(kernelSumUs).toBeCloseTo(335);
    const by = Object.fromEntries(perKernel.map((r) => [r.name, r]));
    expect(by[GEMM_GROUP]).toMatchObject({ countPerStep: 2, gemm: true });
    expect(by[GEMM_GROUP]!.usPerStep).toBeCloseTo(300);
    expect(by[GEMM_GROUP]!.variants!.map((v) => v.name)).toEqual([shortName(CUTLASS), XMMA]);
    expect(by.fk_rms_norm!.usPerStep).toBeCloseTo(5);
    expect(by.fk_sampler_argmax!.shareOfStep).toBeCloseTo(20 / 400);
    expect(perKernel[0]!.name).toBe(GEMM_GROUP); // largest first

    const a = analyzeDecodeProfile({ kernels: ks, steps: 8, stepMs: 0.4, graphReplayMs: 0.37 });
    expect(a).toMatchObject({ kernelsPerStep: 5, stepsMatched: 8, launches: WARMUP.length + 40 });
    expect(a.kernelSumMs).toBeCloseTo(0.335);
    expect(a.gapMs).toBeCloseTo(0.065);
    expect(a.gapPerKernelUs).toBeCloseTo(13);
    expect(a.graphGapMs).toBeCloseTo(0.035);
    expect(a.hostGapMs).toBeCloseTo(0.03);
    expect(analyzeDecodeProfile({ kernels: ks.slice(0, 3), steps: 8 }).error).toMatch(/no repeating kernel sequence/);
  });

  it('counts the weight bytes of the bs-1 GEMMs and their bandwidth by role', () => {
    const cfg8b = { hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32, num_attention_heads: 32, num_key_value_heads: 8, head_dim: 128, vocab_size: 128256 };
    const w = llamaGemmWeights(cfg8b);
    expect(w.layerRoles.map((r) => [r.role, r.k, r.n])).toEqual([['qkv', 4096, 6144], ['o', 4096, 4096], ['gate_up', 4096, 28672], ['down', 14336, 4096]]);
    expect(w.totalBytes).toBe(2 * (32 * (4096 * 6144 + 4096 * 4096 + 4096 * 28672 + 14336 * 4096) + 4096 * 128256));
    // a 2-layer model: 2 x 4 + 1 GEMMs per step, assigned qkv, o, gate_up, down, ..., lm_head
    const tiny = { ...cfg8b, num_hidden_layers: 2, hidden_size: 8, intermediate_size: 16, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 4, vocab_size: 32 };
    const tw = llamaGemmWeights(tiny);
    const step = [['fk_embedding', 1], ...Array.from({ length: 2 }, () => [[XMMA, 2], ['fk_rotary', 1], [XMMA, 1], [CUTLASS, 4], ['fk_silu_and_mul', 1], [XMMA, 3]]).flat(), [CUTLASS, 8]].map(([name, us]) => ({ name: name as string, us: us as number }));
    const roles = gemmRoles(step, tw)!;
    expect(roles.map((r) => [r.role, r.count, r.usPerStep])).toEqual([['qkv', 2, 4], ['o', 2, 2], ['gate_up', 2, 8], ['down', 2, 6], ['lm_head', 1, 8]]);
    expect(roles[4]!.achievedGBs).toBeCloseTo((8 * 32 * 2) / 8e3);
    expect(gemmRoles(step.slice(0, 5), tw)).toBeNull();
  });

  const dir = mkdtempSync(join(tmpdir(), 'fk-decode-profile-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the post CLI writes decode_profile.json and the table; without ncu data it still writes the step time and exits 1', () => {
    const csv = join(dir, 'ncu.csv');
    const run = join(dir, 'run.json');
    const cfg = join(dir, 'config.json');
    const out = join(dir, 'decode_profile.json');
    writeFileSync(csv, ncuCsv(launches));
    const settings = { chainDecode: true, tuning: { launch: { pdl: true } } }; // bench-common's launchSettings() (PDL inside the tuning)
    writeFileSync(run, JSON.stringify({ device: 'NVIDIA H200', stepMs: 0.4, meanHostMs: 0.02, graphReplayMs: 0.37, decodeSteps: 64, graphSteps: 64, copyGBs: 4000, settings }));
    writeFileSync(cfg, JSON.stringify({ hidden_size: 8, intermediate_size: 16, num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 4, vocab_size: 32 }));
    const r = spawnSync(process.execPath, [LIB, 'post', '--csv', csv, '--run', run, '--config', cfg, '--steps', '8', '--out', out, '--commit', 'abc123'], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const j = JSON.parse(readFileSync(out, 'utf8'));
    expect(j).toMatchObject({ commit: 'abc123', gpu: 'NVIDIA H200', stepMs: 0.4, kernelsPerStep: 5, stepsMatched: 8, pdl: true, chainDecode: true });
    expect(j.gapMs).toBeCloseTo(0.065);
    expect(j.gemm.copyGBs).toBe(4000); // the measured copy figure
    expect(j.gemmGBs).toBeCloseTo(j.gemm.weightBytes / (300 * 1e3));
    expect(j.perKernel.map((k: { name: string }) => k.name)).toEqual([GEMM_GROUP, 'fk_sampler_argmax', 'fk_embedding', 'fk_rms_norm']);
    expect(r.stdout).toContain('kernels per step 5 (8/8 steps matched)');
    expect(r.stdout).toContain('PDL on, chained decode');
    expect(r.stdout.trim().split('\n').length).toBeGreaterThan(5);
    expect(formatTable(j)).toBe(r.stdout.trimEnd());

    const r2 = spawnSync(process.execPath, [LIB, 'post', '--csv', join(dir, 'missing.csv'), '--run', run, '--config', cfg, '--steps', '8', '--out', out, '--ncu-error', 'ncu not found'], { encoding: 'utf8' });
    expect(r2.status).toBe(1);
    const j2 = JSON.parse(readFileSync(out, 'utf8'));
    expect(j2).toMatchObject({ stepMs: 0.4, error: 'ncu not found', ncu: { error: 'ncu not found' } });
    expect(r2.stdout).toContain('no kernel breakdown: ncu not found');
  });
});
