import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { launchEnv } from '@fastkernels/backend-nccl';
import { UserError, currentTensorParallelGroup, type Backend, type ModuleRegistry } from '@fastkernels/core';
import { LLMEngine, loadTokenizer, type TextTokenizer } from '@fastkernels/model-zoo';
import type { Argv } from 'yargs';
import { environment, selectBackend } from '../env.js';
import { intFlag } from '../flags.js';
import type { Io } from '../io.js';
import { ControlReceiver, followControl, openControlChannel } from '../serve-control.js';
import type { ServerControl } from '../serve/engine-loop.js';
import { OpenAIServer, type OpenAIServerOptions } from '../serve/server.js';
import { TP_HELP, checkTensorParallelRun, runWithTensorParallel } from '../tensor-parallel.js';
import { EP_HELP, resolveParallelFlags } from '../expert-parallel.js';
import { engineFlags, engineOptions, modelSource, type EngineArgs } from './e2e.js';
import { isEncoderFolder, startEmbeddingServe } from './serve-embeddings.js';

/** The server class (serve/server.ts); the old name stays for callers of `serve --tp`'s rank. */
export { OpenAIServer as CompletionServer, type ServerControl };

export interface ServeArgs extends EngineArgs {
  model: string;
  host: string;
  port: number;
  servedModelName?: string;
  tp?: number;
  ep?: number;
  apiKey?: string;
  maxWaiting?: number;
  drainTimeout?: number;
}

/** serve's own flags, checked before the model loads (a typo should not cost a model load). */
function checkServeFlags(argv: ServeArgs): { port: number; maxWaiting: number; drainMs: number } {
  return {
    port: intFlag('port', argv.port, 0, 65535),
    maxWaiting: intFlag('max-waiting', argv.maxWaiting ?? 1024, 1, 1 << 24),
    drainMs: intFlag('drain-timeout', argv.drainTimeout ?? 30, 0, 86_400) * 1000,
  };
}

const isLoopback = (host: string) => host === 'localhost' || host === '::1' || host.startsWith('127.');

/** The server's text side: the folder's tokenizer (or null, ids only) and its end-of-turn id, beside config.json's EOS. */
function serverOptions(argv: ServeArgs, vocabSize: number, architecture: string, log: (l: string) => void): OpenAIServerOptions & { tokenizer: TextTokenizer | null } {
  const tokenizer = loadTokenizer(argv.model, vocabSize);
  if (!tokenizer) log(`no tokenizer.json in ${argv.model}: token ids in and out (/v1/completions with "prompt": [ids]; chat and text prompts answer 400)`);
  if (!argv.apiKey && !isLoopback(argv.host)) log(`warning: serving on ${argv.host} without --api-key: anyone who can reach this address can use the model`);
  return {
    tokenizer, architecture, log,
    eosIds: tokenizer?.eosTokenId !== undefined ? [tokenizer.eosTokenId] : [],
    ...(argv.apiKey ? { apiKey: argv.apiKey } : {}),
    maxWaiting: checkServeFlags(argv).maxWaiting,
  };
}

/** Load the model (this rank's shard under --tp) and build the engine, with the model's EOS id(s) from config.json. */
function buildEngine(argv: ServeArgs, backend: Backend, registry: ModuleRegistry, log: (l: string) => void, tp: { world: number; device?: number } = { world: 1 }): { engine: LLMEngine; name: string; architecture: string; dispose(): void } {
  const src = modelSource(argv.model, backend, argv, tp);
  const loaded = src.load(registry);
  let eos: number | number[] | undefined;
  let architecture = 'unknown';
  try {
    const raw = JSON.parse(readFileSync(resolve(argv.model, 'config.json'), 'utf8')) as { eos_token_id?: number | number[]; architectures?: string[] };
    eos = raw.eos_token_id;
    architecture = raw.architectures?.[0] ?? architecture;
  } catch {
    eos = undefined;
  }
  let engine: LLMEngine;
  try {
    engine = new LLMEngine(loaded.model, loaded.ctx, loaded.geometry, { ...engineOptions(argv, log), ...(eos !== undefined ? { eosTokenId: eos } : {}) });
  } catch (e) {
    loaded.dispose();
    throw e;
  }
  return {
    engine, name: src.name, architecture,
    dispose: () => {
      engine.dispose();
      loaded.dispose();
    },
  };
}

async function listenOrExplain(server: OpenAIServer, port: number, host: string): Promise<AddressInfo> {
  try {
    return await server.listen(port, host);
  } catch (e) {
    throw new UserError(`cannot listen on ${host}:${port}: ${(e as Error).message}`, { field: '--port' });
  }
}

/** Start the server; resolves with it (the CLI then waits for SIGINT/SIGTERM to close it). */
export async function startServe(argv: ServeArgs, io: Io): Promise<{ server: OpenAIServer; address: AddressInfo; stop(): Promise<void>; drain(timeoutMs: number): Promise<boolean> }> {
  const { port } = checkServeFlags(argv);
  const env = environment();
  const backend = selectBackend(env, argv.backend);
  const log = (l: string) => io.err(`${l}\n`);
  const built = buildEngine(argv, backend, env.registry, log);
  let server: OpenAIServer;
  let address: AddressInfo;
  try {
    server = new OpenAIServer(built.engine, argv.servedModelName ?? built.name, serverOptions(argv, built.engine.geometry.vocabSize, built.architecture, log));
    address = await listenOrExplain(server, port, argv.host);
  } catch (e) {
    built.dispose();
    throw e;
  }
  log(`serving ${server.modelName} on http://${address.address}:${address.port}/v1 (completions${server.options.tokenizer ? ', chat' : ', token ids only'}; /metrics, /health)`);
  return {
    server, address,
    drain: (ms) => server.drain(ms),
    stop: async () => {
      await server.close();
      built.dispose();
    },
  };
}

export interface ServeRankOptions {
  readonly rank: number;
  readonly world: number;
  /** Shared by every rank (the launcher's rendezvous token): the control channel's hello. */
  readonly token: string;
  /** Rank 0's control port to every rank (a collective: the group's max all-reduce of [port]). */
  readonly exchangePort: (port: number) => number | Promise<number>;
  readonly modelName: string;
  readonly host: string;
  readonly port: number;
  readonly log: (line: string) => void;
  /** Rank 0: settles when the server should stop (SIGINT/SIGTERM in the CLI). */
  readonly stop: Promise<void>;
  /** Rank 0: after `stop`, how long requests in flight may take to finish (default 0: dropped). */
  readonly drainTimeoutMs?: number;
  /** Rank 0: the server is up. */
  readonly onListening?: (address: AddressInfo, server: OpenAIServer) => void;
  /** Rank 0: the server's text side and limits (serve's flags); none: token ids only. */
  readonly server?: OpenAIServerOptions;
}

/**
 * One rank of `serve --tp N`, its engine built (in the group): open the control channel (serve-control.ts), then rank 0
 * serves HTTP, sending every step's control message first, until `stop` (then every rank gets the shutdown), and the
 * other ranks follow the messages until the shutdown. Rejects when a step fails, a rank goes away or the channel breaks
 * (the process then exits non-zero and the launcher stops the other ranks).
 */
export async function runServeRank(engine: LLMEngine, o: ServeRankOptions): Promise<void> {
  const channel = await openControlChannel({ rank: o.rank, world: o.world, token: o.token, exchangePort: o.exchangePort });
  if (channel instanceof ControlReceiver) {
    try {
      await followControl(engine, channel);
    } finally {
      channel.close();
    }
    return;
  }
  let fatal!: (e: Error) => void;
  const failed = new Promise<never>((_, reject) => (fatal = reject));
  failed.catch(() => {});
  const server = new OpenAIServer(engine, o.modelName, { ...o.server, control: channel, onFatal: (e) => fatal(e), log: o.log });
  channel.onPeerLost = (why) => server.fail(new Error(why));
  let address: AddressInfo;
  try {
    address = await listenOrExplain(server, o.port, o.host);
  } catch (e) {
    await channel.send({ ops: [], step: false, shutdown: true }).catch(() => {});
    channel.close();
    throw e;
  }
  o.log(`serving ${o.modelName} on http://${address.address}:${address.port}/v1 (tensor parallel over ${o.world} GPUs, rank 0 serves)`);
  o.onListening?.(address, server);
  try {
    await Promise.race([o.stop, failed]);
  } catch (e) {
    server.server.closeAllConnections();
    await server.close();
    channel.close();
    throw new Error(`serve --tp ${o.world}: ${(e as Error).message}`);
  }
  await server.drain(o.drainTimeoutMs ?? 0);
  await server.shutdown();
  await server.close();
  channel.close();
}

export function serveCommand(io: Io, rawArgs: readonly string[] = process.argv.slice(2)) {
  return {
    command: 'serve',
    describe: 'An OpenAI-compatible server on the engine: /v1/completions, /v1/chat/completions (needs tokenizer.json), /v1/models, /health, /metrics; for an encoder model (BGE-M3): /v1/embeddings',
    builder: (y: Argv) =>
      engineFlags(y)
        .option('model', { type: 'string', demandOption: true, describe: 'model folder: config.json (+ safetensors)' })
        .option('host', { type: 'string', default: '127.0.0.1', describe: 'address to bind (loopback by default)' })
        .option('port', { type: 'number', default: 8000, describe: '0 = any free port' })
        .option('served-model-name', { type: 'string', describe: 'the model id in responses [default: the folder name]' })
        .option('tp', { type: 'number', default: 1, describe: `${TP_HELP}. Rank 0 serves HTTP and sends every rank each step's new and cancelled requests before the step (a local socket; idle ranks wait there, not in NCCL)` })
        .option('ep', { type: 'number', describe: `${EP_HELP}; rank 0 serves HTTP as under --tp` })
        .option('api-key', { type: 'string', describe: 'require "Authorization: Bearer KEY" on every /v1 route (/health and /metrics stay open)' })
        .option('max-waiting', { type: 'number', default: 1024, describe: 'requests that may wait for the running batch; beyond it new requests get 429' })
        .option('drain-timeout', { type: 'number', default: 30, describe: 'seconds SIGTERM waits for requests in flight before stopping (new ones get 503 meanwhile); SIGINT stops at once' })
        .example('$0 serve --model ./llama3-8b --port 8000', 'then: curl -s localhost:8000/v1/completions -d \'{"prompt": "Hello", "max_tokens": 16}\'')
        .example('$0 serve --model ./llama3-8b --api-key secret', 'then: curl -s localhost:8000/v1/chat/completions -H "Authorization: Bearer secret" -d \'{"messages": [{"role": "user", "content": "Hi"}]}\'')
        .example('$0 serve --model ./llama3-8b --tp 2', 'the same server, the model split over 2 GPUs')
        .epilog(
          'Sampling defaults are OpenAI\'s: temperature 1 (generate\'s --temperature defaults to 0, greedy), top_p 1, max_tokens 16\n' +
            '(chat: the rest of the context); send "temperature": 0 for greedy answers. Without "seed" each request draws a random\n' +
            'seed. A folder without tokenizer.json serves token ids only ("prompt": [1, 2, 3]; each choice carries token_ids).\n' +
            'logprobs / top_logprobs make their requests\' steps eager (the logits are read back; under --tp on every rank).',
        ),
    handler: (argv: ServeArgs) => runServe(argv, io, rawArgs),
  };
}

export async function runServe(argv: ServeArgs, io: Io, rawArgs: readonly string[] = process.argv.slice(2)): Promise<void> {
  const tp = resolveParallelFlags(argv, [argv.model]);
  const { port, drainMs } = checkServeFlags(argv);
  if (isEncoderFolder(argv.model)) {
    // an embedding model: /v1/embeddings on the encoder runner (serve-embeddings.ts)
    const s = await startEmbeddingServe(argv, io, port);
    const signal = await new Promise<NodeJS.Signals>((ok) => {
      process.once('SIGINT', () => ok('SIGINT'));
      process.once('SIGTERM', () => ok('SIGTERM'));
    });
    if (signal === 'SIGTERM' && !(await s.server.drain(drainMs))) io.err('drain timed out: stopping with requests still in flight\n');
    await s.stop();
    return;
  }
  if (tp === 1) {
    const s = await startServe(argv, io);
    const signal = await new Promise<NodeJS.Signals>((ok) => {
      process.once('SIGINT', () => ok('SIGINT'));
      process.once('SIGTERM', () => ok('SIGTERM'));
    });
    if (signal === 'SIGTERM') {
      io.err(`SIGTERM: draining (${s.server.loop.inFlight} requests in flight, up to ${drainMs / 1000} s; new requests get 503)\n`);
      if (!(await s.drain(drainMs))) io.err('drain timed out: stopping with requests still in flight\n');
    }
    await s.stop();
    return;
  }
  if (argv.randomInit === 'device') {
    throw new UserError('device random init cannot be sharded over ranks', { field: '--random-init', fix: 'with --tp, use --random-init host (the default then) or a checkpoint (`fastkernels init-weights`)' });
  }
  const env = environment();
  const backend = selectBackend(env, argv.backend);
  engineOptions(argv, () => {}); // the engine flags, checked before any rank starts
  const drainTimeoutMs = drainMs;
  await runWithTensorParallel(
    {
      tp, io, rawArgs,
      preflight: () => {
        checkTensorParallelRun(tp, argv.model, backend);
      },
      // Ctrl-C is how a server stops: every rank leaving cleanly after it is a success
      relaunch: { interruptIsSuccess: true },
    },
    async (rank) => {
      const log = (l: string) => rank.io.err(`${l}\n`);
      const built = buildEngine(argv, backend, env.registry, log, { world: rank.world, ...(rank.device !== undefined ? { device: rank.device } : {}) });
      // the launcher forwards SIGINT/SIGTERM to every rank: rank 0 turns it into the shutdown message; the others wait
      // for that message (a rank 0 that dies closes their socket instead)
      const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];
      let onSignal = () => {};
      const stop = new Promise<void>((ok) => (onSignal = () => ok()));
      for (const s of signals) process.on(s, onSignal);
      const group = currentTensorParallelGroup();
      const on = { backend: built.engine.ctx.backend, device: built.engine.ctx.device };
      try {
        await runServeRank(built.engine, {
          rank: rank.rank, world: rank.world, token: launchEnv()?.token ?? '',
          exchangePort: (p) => group.agree([p], 'max', on)[0]!,
          modelName: argv.servedModelName ?? built.name, host: argv.host, port, log, stop, drainTimeoutMs,
          ...(rank.rank === 0 ? { server: serverOptions(argv, built.engine.geometry.vocabSize, built.architecture, log) } : {}),
        });
      } finally {
        for (const s of signals) process.off(s, onSignal);
        built.dispose();
      }
    },
  );
}
