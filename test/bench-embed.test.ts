// The embed suite (bench/suites/embed, issue 35's offline and serving speed) where no GPU is needed: the driver's flags,
// the seeded workload both sides read, the merge into embed.json with the targets last, the headline bench/run records,
// and run.sh's wiring (a stand-in bundle whose driver writes our JSON, whose `serve` answers /health and whose
// `bench-serve` writes a serving JSON; no torch, so HF is skipped and the merge still runs; a server that never comes
// up still leaves the offline figures merged).
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
const served = (tokS: number, failed = 0) => ({
  endpoint: 'embeddings', num_prompts: 10000, max_concurrency: 64, encoding_format: 'base64', completed: 10000 - failed, failed,
  requestThroughput: tokS / 272, inputThroughput: tokS, e2eMs: { mean: 40, p50: 38, p90: 60, p99: 90, max: 120 }, first_error: failed ? 'HTTP 500: boom' : null,
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
    expect(m.targets.map((t) => [t.key, t.met])).toEqual([['oursOverHfSdpa', true], ['oursOverHfCompile', true], ['serveOverOffline', null]]);
    const lines = formatEmbed(m);
    expect(lines.slice(-3)).toEqual([
      'target: tokens/s vs HF transformers sdpa (padded batches of 64) >= 2x: 2.25x MET',
      'target: tokens/s vs HF transformers under torch.compile >= 1.2x: 1.50x MET',
      'target: /v1/embeddings tokens/s under 64 clients (bench-serve) vs the offline embed figure >= 0.9x: - NOT MEASURED',
    ]);
    expect(lines.join('\n')).toContain('HF sdpa + torch.compile of 64: 1100.0 seq/s, 300000 tokens/s (3000000 padded tokens, compile 61.0 s excluded)');
    expect(formatEmbed(mergeEmbed(ours(300_000), hf)).slice(-3, -1).map((l) => l.split(': ').pop())).toEqual(['1.50x MISSED', '1.00x MISSED']);
    expect(TARGETS.map((t) => t.target)).toEqual([2, 1.2, 0.9]);
  });

  it('the serving step: tokens/s over the offline figure of the same run; failed requests give no ratio', () => {
    const m = mergeEmbed(ours(450_000), hf, { serve: served(420_000) });
    expect(m.summary).toMatchObject({ serveTokS: 420_000, serveOverOffline: 420_000 / 450_000 });
    const lines = formatEmbed(m);
    expect(lines.at(-1)).toBe('target: /v1/embeddings tokens/s under 64 clients (bench-serve) vs the offline embed figure >= 0.9x: 0.93x MET');
    expect(lines.join('\n')).toContain('serve (/v1/embeddings, 64 clients through bench-serve, 10000 documents, base64): 1544.1 req/s, 420000 tokens/s, latency p50 38.0 / p99 90.0 ms');
    expect(formatEmbed(mergeEmbed(ours(450_000), hf, { serve: served(360_000) })).at(-1)).toMatch(/0\.80x MISSED$/);
    const failed = mergeEmbed(ours(450_000), hf, { serve: served(440_000, 3) });
    expect(failed.summary.serveOverOffline).toBeNull();
    expect(formatEmbed(failed).join('\n')).toContain('serve: 3 requests failed; the first: HTTP 500: boom');
    expect(HEADLINES.embed!(m)).toMatchObject({ serveTokS: 420_000, serveOverOffline: 0.9333 });
  });

  it('a missing side still merges: the targets say NOT MEASURED, the history line records what there is', () => {
    const m = mergeEmbed(ours(450_000), null);
    expect(m.targets.every((t) => t.met === null)).toBe(true);
    const text = formatEmbed(m).join('\n');
    expect(text).toContain('hf: NO RESULTS');
    expect(text).toMatch(/NOT MEASURED\n.*NOT MEASURED\n.*NOT MEASURED$/);
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
  /** A stand-in bundle: run-node is the driver; `run serve` a node server answering /health (or exiting at once when
   * `serverUp` is false), `run bench-serve` records its arguments and writes a serving JSON, `run --print-node` node. */
  function standIn(name: string, serverUp: boolean) {
    const bundle = join(dir, name);
    mkdirSync(bundle, { recursive: true });
    // run-node stands in for the driver: it records its arguments and writes our side where --json says
    const oursJson = JSON.stringify(ours(450_000));
    writeFileSync(join(bundle, 'run-node'), `#!/usr/bin/env bash\necho "$@" > "${join(bundle, 'driver-args')}"\nwhile [ $# -gt 0 ]; do case "$1" in --json) j="$2"; shift ;; --workload) w="$2"; shift ;; esac; shift; done\necho '${oursJson}' > "$j"\nprintf '{"input_ids":[0,5,2]}\\n[0,7,2]\\n' > "$w"\n`);
    const server = `require('http').createServer((q, s) => s.end('{"status":"ok"}')).listen(Number(process.argv[1]), '127.0.0.1')`;
    writeFileSync(join(bundle, 'run'), [
      '#!/usr/bin/env bash',
      `node="${process.execPath}"`,
      'case "$1" in',
      `  serve) echo "$@" > "${join(bundle, 'serve-args')}"; ${serverUp ? `while [ $# -gt 0 ]; do [ "$1" = --port ] && p="$2"; shift; done; exec "$node" -e "${server.replace(/"/g, '\\"')}" "$p"` : 'echo "no GPU" >&2; exit 1'} ;;`,
      `  bench-serve) echo "$@" >> "${join(bundle, 'bench-args')}"; while [ $# -gt 0 ]; do [ "$1" = --json-out ] && j="$2"; shift; done; echo '${JSON.stringify(served(420_000))}' > "$j" ;;`,
      '  *) echo "$node" ;;',
      'esac',
      '',
    ].join('\n'));
    for (const f of ['run', 'run-node']) chmodSync(join(bundle, f), 0o755);
    writeFileSync(join(bundle, 'MANIFEST.json'), '{ "commit": "abc123" }');
    return bundle;
  }
  const port = String(20000 + Math.floor(Math.random() * 20000));

  it('writes the BGE-M3 config, runs the driver with the flags, skips HF without torch, serves and drives bench-serve, merges into embed.json', () => {
    const bundle = standIn('bundle', true);
    const out = join(dir, 'work');
    const r = spawnSync('bash', [join(SUITE, 'run.sh'), '--quick', '--no-compile', '--n', '50', '--serve-port', port], { encoding: 'utf8', env: { ...process.env, FASTKERNELS_BUNDLE: bundle, OUT: out, PYTHON: '/bin/false' } });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain('HF comparison skipped');
    const serveArgs = readFileSync(join(bundle, 'serve-args'), 'utf8');
    expect(serveArgs).toMatch(new RegExp(`^serve --model .*embed-bge-m3 --backend cuda --dtype bf16 --port ${port} --max-num-batched-tokens 16384`));
    const benchArgs = readFileSync(join(bundle, 'bench-args'), 'utf8').trim().split('\n');
    // a warm-up pass over the workload's first documents (2 here), then all of them, 64 clients, the same file
    expect(benchArgs).toHaveLength(2);
    for (const a of benchArgs) expect(a).toMatch(new RegExp(`^bench-serve --endpoint embeddings --base-url http://127.0.0.1:${port} --dataset token-ids --dataset-path .*embed-workload\\.jsonl --max-concurrency 64 --warmup 0 --encoding-format base64`));
    expect(benchArgs[0]).toMatch(/--num-prompts 2 --json-out .*embed_serve_warmup\.json$/);
    expect(benchArgs[1]).toMatch(/--num-prompts 2 --json-out .*embed_serve\.json$/);
    expect(r.stdout.trim().split('\n').at(-2)).toMatch(/^target: \/v1\/embeddings .* 0\.93x MET$/);
    const args = readFileSync(join(bundle, 'driver-args'), 'utf8');
    expect(args).toMatch(/embed\/embed\.mjs --model .*embed-bge-m3 --json .*embed_ours\.json --workload .*embed-workload\.jsonl --quick --n 50/);
    expect(args).not.toContain('--no-compile'); // HF's flag stays on the HF side
    const cfg = JSON.parse(readFileSync(join(out, 'embed-bge-m3', 'config.json'), 'utf8'));
    expect(cfg).toMatchObject({ model_type: 'xlm-roberta', num_hidden_layers: 24, hidden_size: 1024, num_attention_heads: 16, intermediate_size: 4096, vocab_size: 250002, max_position_embeddings: 8194, pad_token_id: 1 });
    const merged = JSON.parse(readFileSync(join(out, 'embed.json'), 'utf8'));
    expect(merged).toMatchObject({ commit: 'abc123', summary: { oursTokS: 450000, hfSdpaTokS: null, serveTokS: 420000 }, serve: { endpoint: 'embeddings' } });
    expect(r.stdout.trim().split('\n').slice(-4, -2).every((l) => l.startsWith('target: ') && l.endsWith('NOT MEASURED'))).toBe(true);
  }, 60_000);

  it('a server that never comes up: serving skipped with its log tail, the offline figures still merged; --no-serve skips it', () => {
    const bundle = standIn('bundle-down', false);
    const out = join(dir, 'work-down');
    const r = spawnSync('bash', [join(SUITE, 'run.sh'), '--quick', '--serve-port', port], { encoding: 'utf8', env: { ...process.env, FASTKERNELS_BUNDLE: bundle, OUT: out, PYTHON: '/bin/false' } });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/the server did not answer \/health .* serving skipped[\s\S]*no GPU/);
    const merged = JSON.parse(readFileSync(join(out, 'embed.json'), 'utf8'));
    expect(merged).toMatchObject({ summary: { oursTokS: 450000, serveTokS: null }, serve: null });
    expect(r.stdout).toContain('serve: not measured');
    const r2 = spawnSync('bash', [join(SUITE, 'run.sh'), '--quick', '--no-serve'], { encoding: 'utf8', env: { ...process.env, FASTKERNELS_BUNDLE: standIn('bundle-noserve', true), OUT: join(dir, 'work-noserve'), PYTHON: '/bin/false' } });
    expect(r2.status, r2.stderr).toBe(0);
    expect(r2.stdout).not.toContain('serving on');
  }, 60_000);
});
