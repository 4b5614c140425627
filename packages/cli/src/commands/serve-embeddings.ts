/**
 * `serve` on an encoder (embedding) model folder: the model through loadEncoderModel, the encoder runner, and the
 * embedding server (serve/embedding-server.ts). runServe picks this path when the folder's architecture has the
 * 'encoder' runner; the decoder engine's flags do not apply to it.
 */
import type { AddressInfo } from 'node:net';
import { UserError, type DType } from '@fastkernels/core';
import { Checkpoint, EncoderRunner, loadEncoderModel, loadModelFolderConfig, loadTokenizer } from '@fastkernels/model-zoo';
import { environment, selectBackend } from '../env.js';
import type { Io } from '../io.js';
import { EmbeddingServer } from '../serve/embedding-server.js';
import type { ServeArgs } from './serve.js';

const DTYPES: Record<string, DType> = { f32: 'f32', bf16: 'bf16', f16: 'f16' };

/** Whether a model folder is served by the embedding server (its architecture's runner is 'encoder'). */
export function isEncoderFolder(dir: string): boolean {
  return loadModelFolderConfig(dir).architecture.runner === 'encoder';
}

export async function startEmbeddingServe(argv: ServeArgs, io: Io, port: number): Promise<{ server: EmbeddingServer; address: AddressInfo; stop(): Promise<void> }> {
  if ((argv.tp ?? 1) > 1) throw new UserError('encoder models are served on one device', { field: '--tp', fix: 'drop --tp' });
  const env = environment();
  const backend = selectBackend(env, argv.backend);
  const log = (l: string) => io.err(`${l}\n`);
  const dtype = argv.dtype;
  // the folder's safetensors unless --random-init; without them, seeded random weights, filled on the device on cuda
  // (as the decoder path: a config-only folder of a real-size model, the embed suite's serving step)
  const randomInit = (argv.randomInit ?? (Checkpoint.exists(argv.model) ? undefined : backend.name === 'cuda' ? 'device' : undefined)) as 'host' | 'device' | undefined;
  const loaded = loadEncoderModel(argv.model, { backend, registry: env.registry, ...(randomInit ? { randomInit } : {}), ...(dtype && DTYPES[dtype] ? { dtype: DTYPES[dtype] } : {}) });
  try {
    const tokenizer = loadTokenizer(argv.model, loaded.geometry.vocabSize);
    if (!tokenizer) log(`no tokenizer.json in ${argv.model}: token ids only ("input": [0, 5, 2] or [[...], [...]])`);
    const runner = new EncoderRunner(loaded.model, loaded.ctx, {
      padTokenId: (loaded.config as { padTokenId?: number }).padTokenId ?? 0,
      maxLength: loaded.geometry.maxPositionEmbeddings,
      // the engine's token budget flag bounds each forward (packed: the sum of the inputs' tokens)
      ...(argv.maxNumBatchedTokens ? { maxNumBatchedTokens: argv.maxNumBatchedTokens } : {}),
    });
    const name = argv.servedModelName ?? argv.model.replace(/\/+$/, '').split('/').pop()!;
    const server = new EmbeddingServer(runner, name, {
      tokenizer, log, maxModelLen: loaded.geometry.maxPositionEmbeddings, hiddenSize: loaded.geometry.hiddenSize, architecture: loaded.architecture.name,
      ...(argv.apiKey ? { apiKey: argv.apiKey } : {}),
    });
    let address: AddressInfo;
    try {
      address = await server.listen(port, argv.host);
    } catch (e) {
      throw new UserError(`cannot listen on ${argv.host}:${port}: ${(e as Error).message}`, { field: '--port' });
    }
    log(`serving ${name} (${loaded.architecture.describe?.(loaded.config) ?? loaded.architecture.name}) on http://${address.address}:${address.port}/v1 (embeddings${tokenizer ? '' : ', token ids only'}; /health)`);
    return {
      server, address,
      stop: async () => {
        await server.close();
        loaded.model.dispose();
      },
    };
  } catch (e) {
    loaded.model.dispose();
    throw e;
  }
}
