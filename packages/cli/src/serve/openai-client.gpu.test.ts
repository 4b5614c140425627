/**
 * The openai-client checks (openai-client.suite.ts) on the CUDA backend (tag gpu: the GPU host runs it bundled, with
 * no checkout there, so the fixture's files are imported and written to a temporary model folder).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import config from '../../../model-zoo/fixtures/tiny-llama-chat/config.json' with { type: 'json' };
import tokenizer from '../../../model-zoo/fixtures/tiny-llama-chat/tokenizer.json' with { type: 'json' };
import tokenizerConfig from '../../../model-zoo/fixtures/tiny-llama-chat/tokenizer_config.json' with { type: 'json' };
import { openAIClientSuite } from './openai-client.suite.js';

const dir = join(mkdtempSync(join(tmpdir(), 'fk-openai-gpu-')), 'tiny-llama-chat');
mkdirSync(dir, { recursive: true });
for (const [name, obj] of [['config.json', config], ['tokenizer.json', tokenizer], ['tokenizer_config.json', tokenizerConfig]] as const) writeFileSync(join(dir, name), JSON.stringify(obj));

openAIClientSuite({ model: dir, backend: 'cuda', dtype: 'f32', tags: ['gpu'] });
