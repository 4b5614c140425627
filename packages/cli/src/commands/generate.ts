import { UserError, type Backend, type DType, type ModuleRegistry } from '@fastkernels/core';
import { checkPromptVocabulary, generate, loadModel, loadTokenizer, type TextTokenizer, promptLogits, readPromptFile, writeSafetensors, type GenerateResult, type SourcedPrompt } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { environment, selectBackend } from '../env.js';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';
import { TP_HELP, checkTensorParallelRun, runWithTensorParallel } from '../tensor-parallel.js';
import { EP_HELP, resolveParallelFlags } from '../expert-parallel.js';

export interface GenerateArgs {
  model: string;
  promptIds?: string;
  /** Text, encoded with the folder's tokenizer.json. */
  prompt?: string;
  promptFile?: string;
  maxTokens: number;
  temperature: number;
  topK: number;
  topP: number;
  seed: number;
  backend: string;
  dtype?: string;
  json?: boolean;
  logitsOut?: string;
  promptLogits?: boolean;
  randomInit?: string;
  initSeed: number;
  tp?: number;
  ep?: number;
}

function parsePromptIds(s: string): SourcedPrompt[] {
  const parts = s.split(',').map((x) => x.trim()).filter(Boolean);
  const ids = parts.map(Number);
  if (!ids.length || ids.some((n) => !Number.isInteger(n) || n < 0)) {
    throw new UserError(`expected comma-separated non-negative integers, got '${s}'`, { field: '--prompt-ids', fix: '--prompt-ids 1,2,3' });
  }
  return [{ promptIds: ids, where: '--prompt-ids' }];
}

const DTYPES: Record<string, DType> = { bf16: 'bf16', f16: 'f16', f32: 'f32' };

/** --prompt TEXT: the folder's tokenizer encodes it (with its BOS, as transformers' tokenizer(text) does). */
function textPrompt(model: string, text: string): { prompts: SourcedPrompt[]; tokenizer: TextTokenizer } {
  const tokenizer = loadTokenizer(model);
  if (!tokenizer) throw new UserError(`${model} has no tokenizer.json, so text cannot be encoded`, { field: '--prompt', fix: 'give token ids with --prompt-ids 1,2,3, or add the model\'s tokenizer.json (and tokenizer_config.json) to the folder' });
  return { prompts: [{ promptIds: tokenizer.encode(text), where: '--prompt' }], tokenizer };
}

export async function runGenerate(argv: GenerateArgs, processIo: Io, rawArgs: readonly string[] = process.argv.slice(2)): Promise<void> {
  const text = argv.prompt !== undefined ? textPrompt(argv.model, String(argv.prompt)) : null;
  const prompts = text ? text.prompts : argv.promptFile ? readPromptFile(argv.promptFile) : parsePromptIds(String(argv.promptIds ?? ''));
  // decoding outputs needs the tokenizer too; a folder without one keeps working with ids (and says so)
  const tokenizer = text?.tokenizer ?? loadTokenizer(argv.model);
  const maxTokens = intFlag('max-tokens', argv.maxTokens, 1, 1 << 20);
  const topK = intFlag('top-k', argv.topK, -1, 1 << 30);
  const seed = intFlag('seed', argv.seed, 0, Number.MAX_SAFE_INTEGER);
  if (!(argv.temperature >= 0)) throw new UserError(`must be >= 0, got ${argv.temperature}`, { field: '--temperature' });
  if (!(argv.topP > 0 && argv.topP <= 1)) throw new UserError(`must be in (0, 1], got ${argv.topP}`, { field: '--top-p' });

  if (argv.promptLogits && !argv.logitsOut) throw new UserError('--prompt-logits needs --logits-out FILE.safetensors', { field: '--prompt-logits' });
  if (argv.randomInit !== undefined && argv.randomInit !== 'host' && argv.randomInit !== 'device') throw new UserError(`expected host or device, got '${argv.randomInit}'`, { field: '--random-init' });
  const initSeed = intFlag('init-seed', argv.initSeed, 0, 2 ** 32 - 1);
  const tp = resolveParallelFlags(argv, [argv.model]);
  if (tp > 1 && argv.randomInit === 'device') {
    throw new UserError('device random init cannot be sharded over ranks', { field: '--random-init', fix: 'with --tp, use --random-init host or a checkpoint (`fastkernels init-weights`)' });
  }

  const env = environment();
  const backend = selectBackend(env, argv.backend);
  await runWithTensorParallel(
    {
      tp, io: processIo, rawArgs,
      preflight: () => {
        const config = checkTensorParallelRun(tp, argv.model, backend);
        checkPromptVocabulary(prompts, config.vocabSize, `${argv.model}/config.json`);
      },
    },
    (rank) => generateOn(argv, rank.io, { backend, registry: env.registry, prompts, tokenizer, maxTokens, topK, seed, initSeed, tp, ...(rank.device !== undefined ? { device: rank.device } : {}) }, rank.primary),
  );
}

interface Run {
  readonly backend: Backend;
  readonly registry: ModuleRegistry;
  readonly prompts: SourcedPrompt[];
  readonly tokenizer: TextTokenizer | null;
  readonly maxTokens: number;
  readonly topK: number;
  readonly seed: number;
  readonly initSeed: number;
  readonly tp: number;
  readonly device?: number;
}

/** Load the model (this rank's shard under --tp), generate, print or write the results. */
async function generateOn(argv: GenerateArgs, io: Io, run: Run, primary: boolean): Promise<void> {
  const { backend, prompts, maxTokens, topK, seed, initSeed, tp } = run;
  const loaded = loadModel(argv.model, {
    backend, registry: run.registry, initSeed,
    ...(run.device !== undefined ? { device: run.device } : {}),
    ...(argv.dtype ? { dtype: DTYPES[argv.dtype]! } : {}),
    ...(argv.randomInit ? { randomInit: argv.randomInit as 'host' | 'device' } : {}),
  });
  const config = loaded.geometry;
  const about = loaded.architecture.describe?.(loaded.config) ?? loaded.architecture.name;
  // Vocabulary check here, where the file and line are known.
  checkPromptVocabulary(prompts, config.vocabSize, `${argv.model}/config.json`);
  if (!argv.json) io.err(`model ${argv.model}: ${about}, ${WEIGHTS_NOTE[loaded.weights](initSeed)}, ${loaded.ctx.dtype} on ${backend.name}${tp > 1 ? `, tensor parallel over ${tp} GPUs` : ''}${run.tokenizer ? '' : '; no tokenizer.json: token ids in and out'}\n`);

  let result: GenerateResult;
  let prompt: Float32Array[] = [];
  let promptMs = 0;
  try {
    if (argv.promptLogits) {
      // Before generate: the same prefill path, in a cache of its own (generate's first step is unaffected).
      const t0 = performance.now();
      prompt = prompts.map((p) => promptLogits(loaded.model, loaded.ctx, config, p.promptIds));
      promptMs = performance.now() - t0;
    }
    result = generate(loaded.model, loaded.ctx, config, prompts, {
      maxTokens, temperature: argv.temperature, topK, topP: argv.topP, seed, collectLogits: Boolean(argv.logitsOut),
    });
  } finally {
    loaded.model.dispose();
  }

  if (argv.logitsOut && primary) {
    const V = config.vocabSize;
    writeSafetensors(
      argv.logitsOut,
      [
        ...result.outputs.map((o, i) => ({
          name: `logits.${i}`,
          dtype: 'f32' as const,
          shape: [o.logits!.length, V],
          bytes: () => {
            const all = new Float32Array(o.logits!.length * V);
            o.logits!.forEach((row, s) => all.set(row, s * V));
            return new Uint8Array(all.buffer);
          },
        })),
        ...prompt.map((l, i) => ({ name: `prompt_logits.${i}`, dtype: 'f32' as const, shape: [l.length / V, V], bytes: () => new Uint8Array(l.buffer, l.byteOffset, l.byteLength) })),
      ],
      {
        format: 'pt', model: argv.model,
        note: `logits.<i>[step, vocab]: float32 logits that produced generated token <step> of prompt <i>${prompt.length ? '; prompt_logits.<i>[pos, vocab]: float32 logits at every prompt position (row pos predicts token pos + 1), from a prefill of the prompt alone' : ''}`,
      },
    );
  }

  const generated = result.outputs.reduce((a, o) => a + o.tokenIds.length, 0);
  const decodeTokens = generated - result.outputs.length;
  const promptTokens = result.outputs.reduce((a, o) => a + o.promptIds.length, 0);
  const timing = {
    weights_ms: round(loaded.weightsMs),
    ...(argv.promptLogits ? { prompt_logits_ms: round(promptMs) } : {}),
    prefill_ms: round(result.prefillMs),
    prefill_tokens: promptTokens,
    // the first step: prefill of every prompt + the first token's sampling and read-back
    prefill_tokens_per_s: result.prefillMs > 0 ? round((promptTokens / result.prefillMs) * 1000) : null,
    decode_ms: round(result.decodeMs),
    steps: result.steps,
    decode_tokens_per_s: result.decodeMs > 0 ? round((decodeTokens / result.decodeMs) * 1000) : null,
  };
  if (argv.json) {
    io.out(JSON.stringify({
      model: argv.model, model_type: loaded.modelType, backend: backend.name, dtype: loaded.ctx.dtype, weights: loaded.weights, tp,
      ...(loaded.weights !== 'checkpoint' ? { init_seed: initSeed } : {}),
      sampling: { max_tokens: maxTokens, temperature: argv.temperature, top_k: topK, top_p: argv.topP, seed },
      outputs: result.outputs.map((o) => ({ prompt_ids: o.promptIds, token_ids: o.tokenIds, ...(run.tokenizer ? { text: run.tokenizer.decode(o.tokenIds) } : {}) })),
      timing,
      ...(argv.logitsOut ? { logits_out: argv.logitsOut } : {}),
    }, null, 2) + '\n');
    return;
  }
  result.outputs.forEach((o, i) => io.out(run.tokenizer ? `${i}: ${JSON.stringify(run.tokenizer.decode(o.tokenIds))} (${o.tokenIds.join(',')})\n` : `${i}: ${o.tokenIds.join(',')}\n`));
  io.err(`${generated} tokens in ${result.steps} steps: prefill ${timing.prefill_ms} ms, decode ${timing.decode_ms} ms${timing.decode_tokens_per_s !== null ? ` (${timing.decode_tokens_per_s} tok/s)` : ''}${argv.logitsOut ? `; logits written to ${argv.logitsOut}` : ''}\n`);
}

const round = (x: number) => Math.round(x * 100) / 100;

const WEIGHTS_NOTE: Record<'checkpoint' | 'random' | 'random-device', (seed: number) => string> = {
  checkpoint: () => 'weights loaded',
  random: (seed) => `random weights (host, seed ${seed}: init-weights' values)`,
  'random-device': (seed) => `random weights (device pools, seed ${seed})`,
};

export function generateCommand(io: Io, rawArgs: readonly string[] = process.argv.slice(2)) {
  return {
    command: 'generate',
    describe: 'Generate tokens with a decoder LLM the model registry reads (HF config.json + safetensors; `init-weights --help` lists the types) on the paged engine',
    builder: (y: Argv) =>
      y
        .option('model', { type: 'string', demandOption: true, describe: 'model folder: config.json and *.safetensors (config.json alone: seeded random weights)' })
        .option('prompt', { type: 'string', describe: "one prompt as text (encoded with the folder's tokenizer.json)" })
        .option('prompt-ids', { type: 'string', describe: 'one prompt as comma-separated token ids' })
        .option('prompt-file', { type: 'string', describe: 'JSONL, one {"prompt_ids": [...], "max_tokens"?: N} per line' })
        .option('max-tokens', { type: 'number', default: 16, describe: 'tokens to generate per prompt (a line\'s max_tokens overrides)' })
        .option('temperature', { type: 'number', default: 0, describe: '0 = greedy' })
        .option('top-k', { type: 'number', default: 0, describe: '<= 0 = off' })
        .option('top-p', { type: 'number', default: 1, describe: '1 = off' })
        .option('seed', { type: 'number', default: 0, describe: 'seed of the sampling draws' })
        .option('backend', { type: 'string', choices: ['auto', 'cpu', 'cuda'], default: 'auto', describe: 'auto = cuda when available, else cpu' })
        .option('dtype', { type: 'string', choices: Object.keys(DTYPES), describe: "model dtype [default: the config's torch_dtype, else bf16]" })
        .option('json', { type: 'boolean', describe: 'print the outputs and timing as JSON' })
        .option('logits-out', { type: 'string', describe: 'also write the float32 logits of every generated token to FILE.safetensors (logits.<prompt>[step, vocab])' })
        .option('prompt-logits', { type: 'boolean', describe: 'with --logits-out: also write the logits of every prompt position (prompt_logits.<prompt>[pos, vocab], from a prefill of the prompt alone)' })
        .option('random-init', { type: 'string', choices: ['host', 'device'], describe: "random weights even if the folder has safetensors: host = init-weights' values for --init-seed; device = seeded pools tiled on the device (fast, for big models; other values)" })
        .option('init-seed', { type: 'number', default: 0, describe: 'seed of random weights (no safetensors, or --random-init)' })
        .option('tp', { type: 'number', default: 1, describe: TP_HELP })
        .option('ep', { type: 'number', describe: EP_HELP })
        .conflicts('prompt-ids', 'prompt-file')
        .conflicts('prompt', ['prompt-ids', 'prompt-file'])
        .check((a) => {
          // A UserError, not a plain Error: yargs hands what a check throws to fail(), and main() reports a plain one as internal.
          if (a['prompt-ids'] === undefined && a['prompt-file'] === undefined && a.prompt === undefined) {
            throw new UserError('no prompt given', { field: '--prompt-ids', fix: 'give one prompt as --prompt "text" (needs tokenizer.json in the folder) or --prompt-ids 1,2,3, or several as --prompt-file prompts.jsonl (one {"prompt_ids": [...]} per line)' });
          }
          return true;
        })
        .example('$0 generate --model ./tiny --prompt-ids 1,2,3 --max-tokens 8', 'greedy continuation of one prompt')
        .example('$0 generate --model ./llama3-8b --prompt "The capital of France is" --max-tokens 16', 'text in and out (the folder\'s tokenizer.json)')
        .example('$0 generate --model ./llama3-8b-config-only --random-init device --prompt-ids 1,2,3 --max-tokens 64 --json', 'random 8B weights filled on the GPU, timing as JSON')
        .example('$0 generate --model ./llama3-8b --prompt-file prompts.jsonl --temperature 0.7 --top-p 0.9 --seed 1 --json', 'sampled, several prompts, JSON out')
        .example('$0 generate --model ./llama3-8b --prompt-ids 1,2,3 --max-tokens 64 --tp 2 --json', 'tensor parallel over 2 GPUs (each rank reads its slice of every weight); same tokens as --tp 1')
        .example('$0 generate --model ./mixtral-8x7b --prompt-ids 1,2,3 --max-tokens 64 --ep 2 --json', 'expert parallel over 2 GPUs: attention tensor-parallel, 4 of the 8 experts per rank')
        .epilog(
          '--tp N: the command starts N ranks through `fastkernels launch` (one process per GPU; rank r uses GPU r) and each loads\n' +
            'its shard of the model: num_attention_heads, num_key_value_heads (or N a multiple of it) and intermediate_size must divide\n' +
            'by N (exit 2 otherwise). Every rank computes the full logits, so all sample the same tokens; only rank 0 prints.\n' +
            'A rank that fails stops the others; the command exits with its code. FASTKERNELS_NCCL_TIMEOUT_MS bounds every wait.',
        ),
    handler: (argv: GenerateArgs) => runGenerate(argv, io, rawArgs),
  };
}
