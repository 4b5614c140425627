import { join, resolve } from 'node:path';
import { openAIClientSuite } from './openai-client.suite.js';

openAIClientSuite({ model: join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures/tiny-llama-chat'), backend: 'cpu', dtype: 'f32' });
