/**
 * `fastkernels embed --model DIR --input docs.jsonl --out vectors.jsonl`: an encoder (embedding) model's vectors for a
 * file of inputs, through the model registry and the encoder runner (packed by a token budget without padding — the
 * varlen path production runs — and pooled per input).
 * Each input line is a JSON array of token ids, {"input_ids": [...]}, or {"text": "..."} / a JSON string (needs the
 * folder's tokenizer.json). Each output line: {"index", "tokens", "embedding"?, "sparse"?, "multi_vector"?}.
 * `generate` refuses encoder folders (loadModel's UserError points here).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { UserError, type DType } from '@fastkernels/core';
import { EncoderRunner, POOLINGS, loadEncoderModel, loadModelFolderConfig, loadTokenizer, type Pooling } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { environment, selectBackend } from '../env.js';
import type { Io } from '../io.js';

export interface EmbedArgs {
  model: string;
  input: string;
  out?: string;
  pooling: string;
  backend: string;
  dtype?: string;
  maxNumBatchedTokens: number;
}

const DTYPES: Record<string, DType> = { f32: 'f32', bf16: 'bf16', f16: 'f16' };

/** One input line -> token ids (text through the tokenizer). */
export function parseEmbedLine(line: string, where: string, encode: ((text: string) => number[]) | null): number[] {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch (e) {
    throw new UserError(`${where}: not JSON: ${(e as Error).message}`);
  }
  const text = typeof v === 'string' ? v : v && typeof v === 'object' && typeof (v as { text?: unknown }).text === 'string' ? (v as { text: string }).text : null;
  if (text !== null) {
    if (!encode) throw new UserError(`${where}: a text input needs the model folder's tokenizer.json`, { fix: 'give token ids ({"input_ids": [...]}) or add tokenizer.json' });
    return encode(text);
  }
  const ids = Array.isArray(v) ? v : (v as { input_ids?: unknown } | null)?.input_ids;
  if (!Array.isArray(ids) || !ids.every((x) => Number.isInteger(x) && x >= 0)) throw new UserError(`${where}: expected token ids (an array of non-negative integers), {"input_ids": [...]} or {"text": "..."}`);
  return ids as number[];
}

export function embedCommand(io: Io) {
  return {
    command: 'embed',
    describe: 'Embed a JSONL file of inputs with an encoder model (BGE-M3): dense, sparse and multi-vector poolings',
    builder: (y: Argv) =>
      y
        .option('model', { type: 'string', demandOption: true, describe: 'model folder: config.json (+ safetensors; random weights without)' })
        .option('input', { type: 'string', demandOption: true, describe: 'JSONL: token-id arrays, {"input_ids": [...]} or {"text": "..."}' })
        .option('out', { type: 'string', describe: 'output JSONL (default: stdout)' })
        .option('pooling', { type: 'string', default: 'dense', describe: `comma-separated: ${POOLINGS.join(', ')}` })
        .option('backend', { type: 'string', default: 'auto', describe: 'cpu, cuda or auto' })
        .option('dtype', { type: 'string', choices: Object.keys(DTYPES), describe: "model dtype (default: the config's)" })
        .option('max-num-batched-tokens', { type: 'number', default: 16384, alias: 'max-batch-tokens', describe: "tokens per forward (vLLM's max_num_batched_tokens): inputs are packed up to it" })
        .example('$0 embed --model bge-m3 --input docs.jsonl --out vectors.jsonl --pooling dense,sparse', 'BGE-M3 dense + lexical weights'),
    handler: (argv: EmbedArgs) => runEmbed(argv, io),
  };
}

/** The command's body (tests call it with a captured Io). */
export function runEmbed(argv: EmbedArgs, io: Io): void {
  const poolings = argv.pooling.split(',').map((p) => p.trim()) as Pooling[];
  for (const p of poolings) if (!POOLINGS.includes(p)) throw new UserError(`unknown pooling '${p}'`, { field: '--pooling', fix: `one of ${POOLINGS.join(', ')}` });
  const env = environment();
  const backend = selectBackend(env, argv.backend);
  const loaded = loadEncoderModel(argv.model, { backend, registry: env.registry, ...(argv.dtype ? { dtype: DTYPES[argv.dtype]! } : {}) });
  try {
    const tok = loadTokenizer(argv.model, loaded.geometry.vocabSize);
    let text: string;
    try {
      text = readFileSync(argv.input, 'utf8');
    } catch (e) {
      throw new UserError(`cannot read ${argv.input}: ${(e as Error).message}`, { field: '--input' });
    }
    const seqs = text.split('\n').map((l, i) => [l, i] as const).filter(([l]) => l.trim()).map(([l, i]) => parseEmbedLine(l, `${argv.input}:${i + 1}`, tok ? (s) => tok.encode(s) : null));
    const cfg = loaded.config as { padTokenId?: number };
    // sparse weights leave out the special tokens (FlagEmbedding: cls, eos, pad, unk): config.json's pad / bos / eos
    const raw = loadModelFolderConfig(argv.model).raw;
    const skipTokenIds = [cfg.padTokenId, raw.bos_token_id, raw.eos_token_id].filter((x): x is number => typeof x === 'number');
    const runner = new EncoderRunner(loaded.model, loaded.ctx, {
      padTokenId: cfg.padTokenId ?? 0,
      skipTokenIds,
      maxLength: loaded.geometry.maxPositionEmbeddings,
      maxNumBatchedTokens: argv.maxNumBatchedTokens,
    });
    const t0 = performance.now();
    const results = runner.embed(seqs, poolings);
    const secs = (performance.now() - t0) / 1000;
    const lines = results.map((r, index) => JSON.stringify({ index, tokens: r.tokens, ...(r.embedding ? { embedding: r.embedding } : {}), ...(r.sparse ? { sparse: r.sparse } : {}), ...(r.multiVector ? { multi_vector: r.multiVector } : {}) }));
    const body = lines.join('\n') + (lines.length ? '\n' : '');
    if (argv.out) writeFileSync(argv.out, body);
    else io.out(body);
    const s = runner.stats;
    const layout = runner.packed ? 'packed' : `${s.paddedTokens} padded`;
    io.err(`embedded ${s.sequences} inputs (${s.tokens} tokens, ${layout}) in ${s.batches} batches, ${secs.toFixed(2)} s: ${(s.sequences / secs).toFixed(1)} seq/s, ${(s.tokens / secs).toFixed(0)} tokens/s on ${backend.name}\n`);
  } finally {
    loaded.model.dispose();
  }
}
