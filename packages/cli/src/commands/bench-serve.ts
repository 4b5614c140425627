import { writeFileSync } from 'node:fs';
import { UserError } from '@fastkernels/core';
import { loadTokenizer } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { sendEmbeddingRequest, type EncodingFormat } from '../bench-serve/embeddings-client.js';
import { runBench } from '../bench-serve/run.js';
import { summarizeEmbeddings, type Slo } from '../bench-serve/stats.js';
import { randomWorkload, seededRandom, shareGptWorkload, tokenIdsWorkload, type BenchRequest } from '../bench-serve/workload.js';
import { intFlag, listFlag } from '../flags.js';
import type { Io } from '../io.js';
import { formatEmbeddingsReport, formatReport } from '../bench-serve/report.js';

export interface BenchServeArgs {
  baseUrl: string;
  /** completions (streamed /v1/completions, the default) or embeddings (/v1/embeddings, one input a request). */
  endpoint?: string;
  encodingFormat?: string;
  model?: string;
  dataset: string;
  datasetPath?: string;
  numPrompts: number;
  inputLen: string;
  outputLen: string;
  idRange: number;
  requestRate: number | string;
  maxConcurrency?: number;
  warmup: number;
  seed: number;
  goodput?: string | string[];
  jsonOut?: string;
  json?: boolean;
  apiKey?: string;
  timeout: number;
  disconnectFraction?: number;
  tokenizer?: string;
}

/** `N` or `MIN:MAX` (a uniform range) of a length flag. */
export function rangeFlag(name: string, v: string): [number, number] {
  const m = /^(\d+)(?::(\d+))?$/.exec(String(v).trim());
  const lo = m ? Number(m[1]) : NaN;
  const hi = m?.[2] !== undefined ? Number(m[2]) : lo;
  if (!m || lo < 1 || hi < lo) throw new UserError(`expected N or MIN:MAX (positive, MIN <= MAX), got '${v}'`, { field: `--${name}`, fix: `--${name} 100:1024 (uniform) or --${name} 128` });
  return [lo, hi];
}

/** vLLM's `--goodput ttft:40 tpot:8 e2el:1000` (ms). */
export function sloFlag(v: string | string[] | undefined): Slo {
  const slo: { ttftMs?: number; tpotMs?: number; e2eMs?: number } = {};
  for (const part of listFlag(v).flatMap((s) => s.split(/\s+/)).filter(Boolean)) {
    const [k, x] = part.split(':');
    const ms = Number(x);
    if (!(ms > 0)) throw new UserError(`expected KEY:MS with MS > 0, got '${part}'`, { field: '--goodput', fix: '--goodput ttft:40 tpot:8 (milliseconds; keys ttft, tpot, e2el)' });
    if (k === 'ttft') slo.ttftMs = ms;
    else if (k === 'tpot') slo.tpotMs = ms;
    else if (k === 'e2el') slo.e2eMs = ms;
    else throw new UserError(`unknown SLO '${k}'`, { field: '--goodput', fix: 'keys: ttft, tpot, e2el (milliseconds)' });
  }
  return slo;
}

function rateFlag(v: number | string): number {
  if (v === 'inf' || v === Infinity || v === 'Infinity') return Infinity;
  const r = Number(v);
  if (!(r > 0)) throw new UserError(`expected requests per second > 0 or inf, got '${v}'`, { field: '--request-rate', fix: '--request-rate 4 (Poisson arrivals) or --request-rate inf (all at once; pace with --max-concurrency)' });
  return r;
}

async function modelOf(base: string, apiKey: string | undefined, timeoutMs: number): Promise<string> {
  let r: Response;
  try {
    r = await fetch(`${base}/v1/models`, { headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {}, signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    throw new UserError(`cannot reach ${base}/v1/models: ${(e as Error).message}`, { field: '--base-url', fix: 'start the server first (fastkernels serve --model DIR), or point --base-url at it' });
  }
  const j = (await r.json().catch(() => null)) as { data?: { id: string }[] } | null;
  const id = j?.data?.[0]?.id;
  if (!r.ok || !id) throw new UserError(`${base}/v1/models answered ${r.status} without a model`, { field: '--model', fix: 'name the model with --model' });
  return id;
}

export async function runBenchServe(argv: BenchServeArgs, io: Io): Promise<void> {
  const num = intFlag('num-prompts', argv.numPrompts, 1, 1 << 20);
  const warmupN = intFlag('warmup', argv.warmup, 0, 1000);
  const seed = intFlag('seed', argv.seed, 0, 2 ** 32 - 1);
  const rate = rateFlag(argv.requestRate);
  const maxConcurrency = argv.maxConcurrency === undefined ? Infinity : intFlag('max-concurrency', argv.maxConcurrency, 1, 1 << 20);
  const timeoutMs = intFlag('timeout', argv.timeout, 1, 86_400) * 1000;
  const slo = sloFlag(argv.goodput);
  const disconnectFraction = argv.disconnectFraction ?? 0;
  if (!(disconnectFraction >= 0 && disconnectFraction <= 1)) throw new UserError(`expected a fraction from 0 to 1, got ${argv.disconnectFraction}`, { field: '--disconnect-fraction', fix: '--disconnect-fraction 0.1 (10% of the clients leave mid-stream)' });
  const endpoint = argv.endpoint ?? 'completions';
  if (endpoint !== 'completions' && endpoint !== 'embeddings') throw new UserError(`unknown endpoint '${argv.endpoint}'`, { field: '--endpoint', fix: '--endpoint completions (streamed /v1/completions) or --endpoint embeddings (/v1/embeddings)' });
  const embeddings = endpoint === 'embeddings';
  const encodingFormat = (argv.encodingFormat ?? 'float') as EncodingFormat;
  if (encodingFormat !== 'float' && encodingFormat !== 'base64') throw new UserError(`expected float or base64, got '${argv.encodingFormat}'`, { field: '--encoding-format' });
  if (embeddings && disconnectFraction > 0) throw new UserError('--disconnect-fraction needs a streamed endpoint', { field: '--disconnect-fraction', fix: 'drop it with --endpoint embeddings (an embedding request does not stream)' });
  if (embeddings && (slo.ttftMs !== undefined || slo.tpotMs !== undefined)) throw new UserError('ttft and tpot do not apply to embeddings', { field: '--goodput', fix: '--goodput e2el:MS (the whole request) with --endpoint embeddings' });
  const base = String(argv.baseUrl).replace(/\/+$/, '').replace(/\/v1$/, '');
  if (!/^https?:\/\//.test(base)) throw new UserError(`expected an http(s) URL, got '${argv.baseUrl}'`, { field: '--base-url', fix: '--base-url http://127.0.0.1:8000' });
  let all: BenchRequest[];
  if (argv.dataset === 'token-ids') {
    if (!argv.datasetPath) throw new UserError('--dataset token-ids needs the file', { field: '--dataset-path', fix: '--dataset-path docs.jsonl (one JSON array of token ids, or {"input_ids": [...]}, a line)' });
    const [outMin, outMax] = rangeFlag('output-len', argv.outputLen);
    const rnd = seededRandom(seed);
    // the file's first N documents are the measured run, in order; the warm-up resends the first ones
    const docs = tokenIdsWorkload(argv.datasetPath, { num, outputLen: outMin }).map((r) => ({ ...r, outputLen: outMin + Math.floor(rnd() * (outMax - outMin + 1)) }));
    all = [...docs.slice(0, warmupN), ...docs];
  } else if (argv.dataset === 'sharegpt') {
    if (!argv.datasetPath) throw new UserError('--dataset sharegpt needs the file', { field: '--dataset-path', fix: '--dataset-path ShareGPT_V3_unfiltered_cleaned_split.json' });
    // a single N fixes every output length; a range (the default) or 'auto' takes each reply's length
    const out = argv.outputLen === undefined || argv.outputLen === 'auto' || String(argv.outputLen).includes(':') ? undefined : rangeFlag('output-len', argv.outputLen)[0];
    let countTokens: ((t: string) => number) | undefined;
    if (argv.tokenizer) {
      const tok = loadTokenizer(argv.tokenizer);
      if (!tok) throw new UserError(`${argv.tokenizer} has no tokenizer.json`, { field: '--tokenizer', fix: 'point --tokenizer at the model folder that holds tokenizer.json' });
      countTokens = (t) => tok.encode(t, false).length;
    }
    all = shareGptWorkload(argv.datasetPath, { num: num + warmupN, seed, ...(out !== undefined ? { outputLen: out } : {}), ...(countTokens ? { countTokens } : {}) });
  } else {
    const [inMin, inMax] = rangeFlag('input-len', argv.inputLen);
    const [outMin, outMax] = rangeFlag('output-len', argv.outputLen);
    all = randomWorkload({ num: num + warmupN, inMin, inMax, outMin, outMax, idRange: intFlag('id-range', argv.idRange, 2, 1 << 30), seed });
  }
  const model = argv.model ?? (await modelOf(base, argv.apiKey, timeoutMs));
  const target = { baseUrl: base, model, timeoutMs, ...(argv.apiKey ? { apiKey: argv.apiKey } : {}) };
  const tty = Boolean(process.stderr.isTTY);
  let lastPct = -1;
  io.err(`bench-serve: ${num} ${embeddings ? '/v1/embeddings' : '/v1/completions'} requests (${argv.dataset}) to ${base} (${model}), rate ${rate === Infinity ? 'inf' : `${rate}/s`}, max concurrency ${maxConcurrency === Infinity ? 'none' : maxConcurrency}, ${warmupN} warm-up\n`);
  const run = await runBench({
    target, warmup: all.slice(0, warmupN), requests: all.slice(warmupN), rate, maxConcurrency, seed, slo, disconnectFraction,
    ...(embeddings ? { send: (t, r) => sendEmbeddingRequest(t, r, encodingFormat) } : {}),
    onProgress: (done, total, failed) => {
      const pct = Math.floor((done / total) * 10);
      const line = `bench-serve: ${done}/${total} done${failed ? `, ${failed} failed` : ''}`;
      if (tty) io.err(`\r${line}${done === total ? '\n' : ''}`);
      else if (pct !== lastPct || done === total) {
        lastPct = pct;
        io.err(`${line}\n`);
      }
    },
  });
  const embedSummary = embeddings ? summarizeEmbeddings(run.results, run.durationMs, slo) : null;
  const summary = embedSummary ?? run.summary;
  const record = {
    base_url: base, endpoint, model, dataset: argv.dataset, num_prompts: num, request_rate: rate === Infinity ? 'inf' : rate,
    max_concurrency: maxConcurrency === Infinity ? null : maxConcurrency, warmup: warmupN, seed,
    ...(embeddings ? { encoding_format: encodingFormat } : {}),
    goodput_slo_ms: slo, ...summary, first_error: run.firstError,
    date: new Date().toISOString(),
  };
  if (argv.jsonOut) writeFileSync(argv.jsonOut, JSON.stringify(record, null, 2) + '\n');
  io.out(argv.json ? JSON.stringify(record, null, 2) + '\n' : embedSummary ? formatEmbeddingsReport(embedSummary) : formatReport(run.summary));
  if (run.firstError) io.err(`${summary.failed} requests failed; the first: ${run.firstError}\n`);
}

export function benchServeCommand(io: Io) {
  return {
    command: 'bench-serve',
    describe: 'Load-test an OpenAI-compatible server (ours or another): TTFT, TPOT, ITL, e2e latency percentiles, throughput, goodput; or its /v1/embeddings (--endpoint embeddings): requests/s, input tokens/s, latency',
    builder: (y: Argv) =>
      y
        .option('base-url', { type: 'string', default: 'http://127.0.0.1:8000', describe: 'the server (its /v1/completions streams the requests, or /v1/embeddings answers them)' })
        .option('endpoint', { type: 'string', choices: ['completions', 'embeddings'], default: 'completions', describe: 'completions: streamed generation; embeddings: one input a request (the prompt: ids or text), output lengths unused' })
        .option('encoding-format', { type: 'string', choices: ['float', 'base64'], default: 'float', describe: 'embeddings: the encoding asked for (the openai clients send base64)' })
        .option('model', { type: 'string', describe: "model id to send [default: the server's first /v1/models entry]" })
        .option('dataset', { type: 'string', choices: ['random', 'sharegpt', 'token-ids'], default: 'random', describe: 'random token-id prompts, a ShareGPT JSON file, or a token-id file (--dataset-path)' })
        .option('dataset-path', { type: 'string', describe: 'sharegpt: ShareGPT-format JSON ([{"conversations": [{"from", "value"}, ...]}]); token-ids: one JSON array of ids or {"input_ids": [...]} a line (its first --num-prompts lines in order; the warm-up resends the first ones)' })
        .option('tokenizer', { type: 'string', describe: "sharegpt: a model folder whose tokenizer.json counts the tokens (and vLLM's length filters apply) [default: 4 characters a token]" })
        .option('num-prompts', { type: 'number', default: 100, describe: 'measured requests' })
        .option('input-len', { type: 'string', default: '100:1024', describe: 'random: prompt tokens, N or MIN:MAX (uniform)' })
        .option('output-len', { type: 'string', default: '100:1024', describe: 'tokens to generate, N or MIN:MAX (sharegpt: N fixes it, otherwise each reply\'s length at 4 characters a token)' })
        .option('id-range', { type: 'number', default: 1000, describe: 'random: prompt ids are drawn from [1, N)' })
        .option('request-rate', { type: 'string', default: 'inf', describe: 'Poisson arrivals per second, or inf (all at once)' })
        .option('max-concurrency', { type: 'number', describe: 'at most this many requests in flight' })
        .option('warmup', { type: 'number', default: 1, describe: 'requests sent first, one at a time, not measured' })
        .option('seed', { type: 'number', default: 0, describe: 'seed of the workload and the arrivals' })
        .option('goodput', { type: 'string', array: true, describe: 'SLOs in ms for goodput: ttft:40 tpot:8 e2el:2000' })
        .option('json-out', { type: 'string', describe: 'also write the summary as JSON to this file' })
        .option('json', { type: 'boolean', describe: 'print the summary as JSON instead of the table' })
        .option('api-key', { type: 'string', describe: 'bearer token for the server' })
        .option('timeout', { type: 'number', default: 600, describe: 'seconds one request may take' })
        .option('disconnect-fraction', { type: 'number', default: 0, describe: 'this fraction of the clients (seeded) leave after 1-5 streamed chunks: the server must cancel them (not counted in the latencies)' })
        .example('$0 bench-serve --num-prompts 256 --input-len 100:1024 --output-len 100:1024', "nano-vllm's workload through HTTP, all at once")
        .example('$0 bench-serve --request-rate 4 --goodput ttft:40 tpot:8 --json-out serving.json', 'Poisson 4 req/s, goodput under SLOs, JSON out')
        .example('$0 bench-serve --endpoint embeddings --dataset token-ids --dataset-path docs.jsonl --num-prompts 10000 --max-concurrency 64', 'an embedding server under 64 clients, one document a request'),
    handler: (argv: BenchServeArgs) => runBenchServe(argv, io),
  };
}
