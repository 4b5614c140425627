import yargs from 'yargs';
import { describe, expect, it } from 'vitest';
import { UserError } from '@fastkernels/core';
import { serveCommand, startServe } from '../commands/serve.js';

describe('serve --help', () => {
  it('says the server samples at temperature 1 by default (OpenAI\'s) where generate is greedy, and how to get greedy', async () => {
    const y = yargs([]).scriptName('fastkernels');
    serveCommand({ out: () => {}, err: () => {} }).builder(y);
    const help = (await y.wrap(null).getHelp()).replace(/\s+/g, " ");
    expect(help).toMatch(/temperature 1 \(generate's --temperature defaults to 0, greedy\)/);
    expect(help).toMatch(/"temperature": 0 for greedy/);
    expect(help).toMatch(/--api-key/);
    expect(help).toMatch(/--max-waiting/);
  });

  it('checks its own flags before loading the model: exit-2 errors naming the flag', async () => {
    const base = { model: '/nonexistent-model-folder', backend: 'cpu', maxNumSeqs: 8, maxNumBatchedTokens: 64, gpuMemoryUtilization: 0.9, graphs: true, host: '127.0.0.1', port: 0 };
    for (const [bad, field] of [[{ maxWaiting: 0 }, '--max-waiting'], [{ drainTimeout: -1 }, '--drain-timeout'], [{ port: 70000 }, '--port']] as const) {
      const e = await startServe({ ...base, ...bad }, { out: () => {}, err: () => {} }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(UserError);
      expect((e as UserError).details.field).toBe(field);
    }
  });
});
