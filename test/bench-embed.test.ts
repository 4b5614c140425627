// The embed suite (bench/suites/embed, issue 35's offline speed) where no GPU is needed: the driver's flags, the seeded
// workload both sides read, the merge into embed.json with the targets last, the headline bench/run records, and
// run.sh's wiring (a stand-in bundle whose driver writes our JSON; no torch, so HF is skipped and the merge still runs).
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { HEADLINES, measuredNothing } from '../bench/lib/record.mjs';
import { EmbedArgError, TARGETS, formatEmbed, makeWorkload, mergeEmbed, parseEmbedArgs, workloadJsonl } from '../bench/suites/embed/embed-lib.mjs';
import { readSide } from '../bench/suites/embed/merge.mjs';

const SUITE = resolve(import.meta.dirname, '../bench/suites/embed');
const dir = mkdtempSync(join(tmpdir(), 'fk-bench-embed-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ours = (tokS: number) => ({
  side: 'ours', device: 'NVIDIA H200', settings: { maxNumBatchedTokens: 16384 },
  workload: { n: 10000, minLen: 32, maxLen: 512, seed: 0, tokens: 2_720_000 },
  runs: { packed: { batches: 170, seqPerS: tokS / 272, tokPerS: tokS } }, summary: { seqPerS: tokS / 272, tokPerS: tokS }, errors: [],
});
const hf = { side: 'hf', device: 'NVIDIA H200', settings: { batch: 64 }, runs: { sdpa: { tokPerS: 200_000, seqPerS: 735, paddedTokens: 3_000_000 }, compile: { tokPerS: 300_000, seqPerS: 1100, paddedTokens: 3_000_000, compileS: 61 } }, skipped: [], errors: [] };

describe('bench/suites/embed/embed-lib.mjs: flags', () => {
  it('defaults are issue 35 workload (10,000 documents, U[32, 512]); --quick is 1000; values parse as integers', () => {
    expect(parseEmbedArgs(['--model', 'm'])).toMatchObject({ model: 'm', n: 10000, minLen: 32, maxLen: 512, seed: 0, maxNumBatchedTokens: 16384, pooling: 'dense', repeats: 1, warmup: 256, json: null, quick: false });
    expect(parseEmbedArgs(['--model', 'm', '--quick'])).toMatchObject({ n: 1000, warmup: 64, quick: true });
    expect(parseEmbedArgs(['--quick', '--model', 'm', '--n', '300', '--max-len', '1024', '--max-num-batched-tokens', '8192', '--json', 'o.json', '--pooling', 'multi-vector'])).toMatchObject({ n: 300, maxLen: 1024, maxNumBatchedTokens: 8192, json: 'o.json', pooling: 'multi-vector' });
  });

  it('a bad flag is an EmbedArgError naming it', () => {
    const bad = (argv: string[], msg: RegExp) => {
      expect(() => parseEmbedArgs(argv)).toThrow(EmbedArgError);
      expect(() => parseEmbedArgs(argv)).toThrow(msg);
    };
    bad([], /--model DIR .* is required/);
    bad(['--model', 'm', '--batch', '64'], /unknown flag '--batch'/);
    bad(['--model', 'm', '--n'], /--n needs a value/);
    bad(['--model', 'm', '--n', '1.5'], /--n must be an integer >= 1, got '1.5'/);
    bad(['--model', 'm', '--n', '0'], /--n must be an integer >= 1/);
    bad(['--model', 'm', '--min-len', '600'], /--min-len 600 is above --max-len 512/);
    bad(['--model', 'm', '--max-len', '9000', '--max-num-batched-tokens', '16384'], /above BGE-M3's 8192 tokens/);
    bad(['--model', 'm', '--max-num-batched-tokens', '256'], /below --max-len 512: a document must fit one forward/);
    bad(['--model', 'm', '--pooling', 'max'], /--pooling 'max': one of dense, cls, mean, sparse, multi-vector/);
  });
});

describe('bench/suites/embed/embed-lib.mjs: the workload', () => {
  it('seeded: lengths in [min, max] spread over the range, <s> ... </s>, no <pad>, ids below the vocab', () => {
    const w = makeWorkload({ n: 3000, minLen: 32, maxLen: 512, seed: 7 });
    expect(makeWorkload({ n: 3000, minLen: 32, maxLen: 512, seed: 7 })).toEqual(w);
    expect(makeWorkload({ n: 3000, minLen: 32, maxLen: 512, seed: 8 })).not.toEqual(w);
    const lens = w.map((d) => d.length);
    expect(Math.min(...lens)).toBe(32);
    expect(Math.max(...lens)).toBe(512);
    const mean = lens.reduce((a, b) => a + b, 0) / lens.length;
    expect(Math.abs(mean - 272)).toBeLessThan(10); // U[32, 512]
    expect(w.filter((d) => d[0] !== 0 || d[d.length - 1] !== 2)).toEqual([]);
    expect(w.flatMap((d) => d.slice(1, -1)).filter((id) => !(Number.isInteger(id) && id >= 3 && id < 250002))).toEqual([]);
    const lines = workloadJsonl(w.slice(0, 2)).trim().split('\n').map((l) => JSON.parse(l) as { input_ids: number[] });
    expect(lines.map((l) => l.input_ids)).toEqual(w.slice(0, 2));
  });
});

describe('bench/suites/embed: the merge and its record', () => {
  it('ratios against HF sdpa and compile; targets last, met or missed', () => {
    const m = mergeEmbed(ours(450_000), hf, { commit: 'c1' });
    expect(m.summary).toMatchObject({ docs: 10000, oursTokS: 450_000, hfSdpaTokS: 200_000, hfCompileTokS: 300_000, oursOverHfSdpa: 2.25, oursOverHfCompile: 1.5 });
    expect(m.targets.map((t) => [t.key, t.met])).toEqual([['oursOverHfSdpa', true], ['oursOverHfCompile', true]]);
    const lines = formatEmbed(m);
    expect(lines.slice(-2)).toEqual([
      'target: tokens/s vs HF transformers sdpa (padded batches of 64) >= 2x: 2.25x MET',
      'target: tokens/s vs HF transformers under torch.compile >= 1.2x: 1.50x MET',
    ]);
    expect(lines.join('\n')).toContain('HF sdpa + torch.compile of 64: 1100.0 seq/s, 300000 tokens/s (3000000 padded tokens, compile 61.0 s excluded)');
    expect(formatEmbed(mergeEmbed(ours(300_000), hf)).slice(-2).map((l) => l.split(': ').pop())).toEqual(['1.50x MISSED', '1.00x MISSED']);
    expect(TARGETS.map((t) => t.target)).toEqual([2, 1.2]);
  });

  it('a missing side still merges: the targets say NOT MEASURED, the history line records what there is', () => {
    const m = mergeEmbed(ours(450_000), null);
    expect(m.targets.every((t) => t.met === null)).toBe(true);
    const text = formatEmbed(m).join('\n');
    expect(text).toContain('hf: NO RESULTS');
    expect(text).toMatch(/NOT MEASURED\n.*NOT MEASURED$/);
    const line = HEADLINES.embed!(m);
    expect(line).toMatchObject({ oursTokS: 450000, hfSdpaTokS: null, oursOverHfSdpa: null });
    expect(measuredNothing(line)).toBe(false);
    // no GPU: the driver wrote only its workload and settings
    expect(measuredNothing(HEADLINES.embed!(mergeEmbed({ workload: { n: 10000 }, runs: {}, summary: {}, errors: [] }, null)))).toBe(true);
    expect(HEADLINES.embed!(mergeEmbed(ours(450_000), hf))).toMatchObject({ oursOverHfSdpa: 2.25, oursOverHfCompile: 1.5 });
  });

  it('readSide: a missing, empty or cut-off file is no side', () => {
    const f = join(dir, 'side.json');
    expect(readSide(f)).toBeNull();
    writeFileSync(f, '');
    expect(readSide(f)).toBeNull();
    writeFileSync(f, '{"side": "ours", "runs": {');
    expect(readSide(f)).toBeNull();
    writeFileSync(f, '{"side": "ours"}');
    expect(readSide(f)).toEqual({ side: 'ours' });
  });
});

describe('bench/suites/embed/run.sh', () => {
  it('writes the BGE-M3 config, runs the driver with the flags, skips HF without torch, merges into embed.json', () => {
    const bundle = join(dir, 'bundle');
    mkdirSync(bundle, { recursive: true });
    // run-node stands in for the driver: it records its arguments and writes our side where --json says
    const oursJson = JSON.stringify(ours(450_000));
    writeFileSync(join(bundle, 'run-node'), `#!/usr/bin/env bash\necho "$@" > "${join(dir, 'driver-args')}"\nwhile [ $# -gt 0 ]; do case "$1" in --json) j="$2"; shift ;; --workload) w="$2"; shift ;; esac; shift; done\necho '${oursJson}' > "$j"\necho '{"input_ids":[0,5,2]}' > "$w"\n`);
    writeFileSync(join(bundle, 'run'), `#!/bin/sh\necho "${process.execPath}"\n`);
    for (const f of ['run', 'run-node']) chmodSync(join(bundle, f), 0o755);
    writeFileSync(join(bundle, 'MANIFEST.json'), '{ "commit": "abc123" }');
    const out = join(dir, 'work');
    const r = spawnSync('bash', [join(SUITE, 'run.sh'), '--quick', '--no-compile', '--n', '50'], { encoding: 'utf8', env: { ...process.env, FASTKERNELS_BUNDLE: bundle, OUT: out, PYTHON: '/bin/false' } });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain('HF comparison skipped');
    const args = readFileSync(join(dir, 'driver-args'), 'utf8');
    expect(args).toMatch(/embed\/embed\.mjs --model .*embed-bge-m3 --json .*embed_ours\.json --workload .*embed-workload\.jsonl --quick --n 50/);
    expect(args).not.toContain('--no-compile'); // HF's flag stays on the HF side
    const cfg = JSON.parse(readFileSync(join(out, 'embed-bge-m3', 'config.json'), 'utf8'));
    expect(cfg).toMatchObject({ model_type: 'xlm-roberta', num_hidden_layers: 24, hidden_size: 1024, num_attention_heads: 16, intermediate_size: 4096, vocab_size: 250002, max_position_embeddings: 8194, pad_token_id: 1 });
    const merged = JSON.parse(readFileSync(join(out, 'embed.json'), 'utf8'));
    expect(merged).toMatchObject({ commit: 'abc123', summary: { oursTokS: 450000, hfSdpaTokS: null } });
    expect(r.stdout.trim().split('\n').slice(-3, -1).every((l) => l.startsWith('target: ') && l.endsWith('NOT MEASURED'))).toBe(true);
  });
});
