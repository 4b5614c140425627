// The embed suite's parts that need no GPU (plain ESM, no package imports: run.sh's node runs merge.mjs with it, the
// driver embed.mjs bundles it, test/bench-embed.test.ts tests it): the flags, the seeded workload both sides read, and
// the merge of our run with HF's into embed.json with issue 35's targets.

/** A bad flag: the driver prints the message and exits 2. */
export class EmbedArgError extends Error {}

const DEFAULTS = { n: 10000, minLen: 32, maxLen: 512, seed: 0, maxNumBatchedTokens: 16384, pooling: 'dense', repeats: 1, warmup: 256 };
const QUICK = { n: 1000, warmup: 64 };
const POOLINGS = ['dense', 'cls', 'mean', 'sparse', 'multi-vector'];
/** BGE-M3's positions: 8194 - padding_idx - 1 tokens at most. */
export const BGE_M3_MAX_LEN = 8192;

/** The driver's flags: --model DIR (required) --json F --workload F --n N --min-len L --max-len L --seed S
 * --max-num-batched-tokens T --pooling P --repeats R --warmup W --quick (1000 documents, 64 warm-up). */
export function parseEmbedArgs(argv) {
  const known = new Set(['--model', '--json', '--workload', '--n', '--min-len', '--max-len', '--seed', '--max-num-batched-tokens', '--pooling', '--repeats', '--warmup', '--quick']);
  const vals = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!known.has(a)) throw new EmbedArgError(`unknown flag '${a}' (flags: ${[...known].join(' ')})`);
    if (a === '--quick') {
      vals.quick = true;
      continue;
    }
    const v = argv[i + 1];
    if (v === undefined || v.startsWith('--')) throw new EmbedArgError(`${a} needs a value`);
    vals[a] = v;
    i++;
  }
  const int = (flag, def, min) => {
    if (vals[flag] === undefined) return def;
    const x = Number(vals[flag]);
    if (!Number.isInteger(x) || x < min) throw new EmbedArgError(`${flag} must be an integer >= ${min}, got '${vals[flag]}'`);
    return x;
  };
  const base = vals.quick ? { ...DEFAULTS, ...QUICK } : DEFAULTS;
  const model = vals['--model'];
  if (!model) throw new EmbedArgError('--model DIR (a folder with config.json) is required');
  const a = {
    model,
    json: vals['--json'] ?? null,
    workload: vals['--workload'] ?? null,
    quick: !!vals.quick,
    n: int('--n', base.n, 1),
    minLen: int('--min-len', base.minLen, 1),
    maxLen: int('--max-len', base.maxLen, 1),
    seed: int('--seed', base.seed, 0),
    maxNumBatchedTokens: int('--max-num-batched-tokens', base.maxNumBatchedTokens, 1),
    pooling: vals['--pooling'] ?? base.pooling,
    repeats: int('--repeats', base.repeats, 1),
    warmup: int('--warmup', base.warmup, 0),
  };
  if (a.minLen > a.maxLen) throw new EmbedArgError(`--min-len ${a.minLen} is above --max-len ${a.maxLen}`);
  if (a.maxLen > BGE_M3_MAX_LEN) throw new EmbedArgError(`--max-len ${a.maxLen} is above BGE-M3's ${BGE_M3_MAX_LEN} tokens`);
  if (a.maxNumBatchedTokens < a.maxLen) throw new EmbedArgError(`--max-num-batched-tokens ${a.maxNumBatchedTokens} is below --max-len ${a.maxLen}: a document must fit one forward`);
  if (!POOLINGS.includes(a.pooling)) throw new EmbedArgError(`--pooling '${a.pooling}': one of ${POOLINGS.join(', ')}`);
  return a;
}

/**
 * The documents: n token-id sequences with lengths uniform in [minLen, maxLen] (seeded LCG), each <s> (0), ids in
 * [3, vocab) (never <pad> 1 or </s> 2), </s> (2): what XLM-R's tokenizer gives a text. Deterministic in the seed.
 */
export function makeWorkload({ n, minLen, maxLen, seed }, vocab = 250002) {
  let s = (seed * 2654435761 + 12345) >>> 0;
  const next = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0);
  const docs = [];
  for (let d = 0; d < n; d++) {
    const len = minLen + (next() % (maxLen - minLen + 1));
    const ids = new Array(len);
    for (let j = 0; j < len; j++) ids[j] = j === 0 ? 0 : j === len - 1 ? 2 : 3 + (next() % (vocab - 3));
    docs.push(ids);
  }
  return docs;
}

/** The workload as JSONL (one {"input_ids": [...]} a line): what embed_hf.py reads. */
export const workloadJsonl = (docs) => docs.map((ids) => JSON.stringify({ input_ids: ids })).join('\n') + '\n';

/**
 * Issue 35's targets (H200): offline, ours over HF sdpa padded batches of 64 and over HF under torch.compile; serving,
 * /v1/embeddings under 64 concurrent clients (bench-serve) over the offline figure of the same run.
 */
export const TARGETS = [
  { key: 'oursOverHfSdpa', label: 'tokens/s vs HF transformers sdpa (padded batches of 64)', target: 2 },
  { key: 'oursOverHfCompile', label: 'tokens/s vs HF transformers under torch.compile', target: 1.2 },
  { key: 'serveOverOffline', label: '/v1/embeddings tokens/s under 64 clients (bench-serve) vs the offline embed figure', target: 0.9 },
];

/** Clients of the serving step (the issue's 64). */
export const SERVE_CLIENTS = 64;

const rate = (side, run) => side?.runs?.[run]?.tokPerS ?? null;
const ratio = (a, b) => (typeof a === 'number' && typeof b === 'number' && b > 0 ? a / b : null);

/** The model line: what the driver built (its config), else the shape run.sh writes. */
function describeModel(c) {
  if (!c?.hiddenSize) return 'BGE-M3 shape (XLM-RoBERTa large: 24 layers, hidden 1024, 16 heads, vocab 250002), random bf16 weights';
  return `${c.architecture} shape (${c.numHiddenLayers} layers, hidden ${c.hiddenSize}, ${c.numAttentionHeads} heads, vocab ${c.vocabSize}), random ${c.dtype} weights`;
}

/**
 * ours (embed.mjs's JSON) + hf (embed_hf.py's, or null) + serve (bench-serve --endpoint embeddings' JSON, or null)
 * -> embed.json's object: every side, a summary, the targets. A serving run with failed requests gives no ratio (its
 * tokens/s would count fewer documents than the offline figure).
 */
export function mergeEmbed(ours, hf, { commit = '', serve = null } = {}) {
  const oursTokS = ours?.summary?.tokPerS ?? null;
  const serveOk = serve && serve.completed > 0 && !serve.failed;
  const serveTokS = serveOk && typeof serve.inputThroughput === 'number' ? serve.inputThroughput : null;
  const summary = {
    docs: ours?.workload?.n ?? hf?.workload?.n ?? null,
    tokens: ours?.workload?.tokens ?? hf?.workload?.tokens ?? null,
    oursSeqS: ours?.summary?.seqPerS ?? null,
    oursTokS,
    hfSdpaTokS: rate(hf, 'sdpa'),
    hfCompileTokS: rate(hf, 'compile'),
    oursOverHfSdpa: ratio(oursTokS, rate(hf, 'sdpa')),
    oursOverHfCompile: ratio(oursTokS, rate(hf, 'compile')),
    serveTokS,
    serveReqS: serveOk ? serve.requestThroughput ?? null : null,
    serveOverOffline: ratio(serveTokS, oursTokS),
  };
  const targets = TARGETS.map((t) => ({ ...t, value: summary[t.key], met: summary[t.key] === null ? null : summary[t.key] >= t.target }));
  return {
    commit: commit || null,
    device: ours?.device ?? hf?.device ?? null,
    model: describeModel(ours?.config),
    workload: ours?.workload ?? hf?.workload ?? null,
    summary,
    targets,
    ours: ours ?? null,
    hf: hf ?? null,
    serve: serve ?? null,
  };
}

/** The report's lines, issue 35's targets last. */
export function formatEmbed(m) {
  const f = (x, p = 0) => (typeof x === 'number' ? x.toFixed(p) : '-');
  const s = m.summary;
  const lines = [`embed.json (commit ${m.commit ?? '?'}, ${m.device ?? '?'}): ${m.model}`];
  if (m.workload) lines.push(`workload: ${m.workload.n} documents, lengths U[${m.workload.minLen}, ${m.workload.maxLen}], ${m.workload.tokens} tokens`);
  for (const [side, d] of [['ours', m.ours], ['hf', m.hf]]) {
    if (!d) lines.push(`${side}: NO RESULTS (see the log above)`);
    for (const e of d?.errors ?? []) lines.push(`${side} error in ${e.run}: ${String(e.error).slice(0, 400)}`);
  }
  const o = m.ours?.runs?.packed;
  lines.push(`ours (packed varlen, ${m.ours?.settings?.maxNumBatchedTokens ?? '?'} tokens a forward, ${o?.batches ?? '?'} forwards): ${f(s.oursSeqS, 1)} seq/s, ${f(s.oursTokS)} tokens/s`);
  for (const [run, label] of [['sdpa', 'HF sdpa, padded batches'], ['compile', 'HF sdpa + torch.compile']]) {
    const r = m.hf?.runs?.[run];
    if (r) lines.push(`${label} of ${m.hf?.settings?.batch ?? '?'}: ${f(r.seqPerS, 1)} seq/s, ${f(r.tokPerS)} tokens/s (${f(r.paddedTokens)} padded tokens${r.compileS != null ? `, compile ${f(r.compileS, 1)} s excluded` : ''})`);
    else if (m.hf?.skipped?.includes(run)) lines.push(`${label}: skipped`);
  }
  const v = m.serve;
  if (!v) lines.push('serve: not measured (--no-serve, no workload, or the step failed: see the log above)');
  else {
    lines.push(`serve (/v1/embeddings, ${v.max_concurrency ?? '?'} clients through bench-serve, ${v.num_prompts ?? '?'} documents, ${v.encoding_format ?? 'float'}): ${f(v.requestThroughput, 1)} req/s, ${f(v.inputThroughput)} tokens/s, latency p50 ${f(v.e2eMs?.p50, 1)} / p99 ${f(v.e2eMs?.p99, 1)} ms`);
    if (v.failed) lines.push(`serve: ${v.failed} requests failed; the first: ${String(v.first_error).slice(0, 400)}`);
  }
  for (const t of m.targets) lines.push(`target: ${t.label} >= ${t.target}x: ${t.value === null ? '-' : `${t.value.toFixed(2)}x`} ${t.met === null ? 'NOT MEASURED' : t.met ? 'MET' : 'MISSED'}`);
  return lines;
}
