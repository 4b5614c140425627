import yargs from 'yargs';
import { describe, expect, it } from 'vitest';
import { serveCommand } from '../commands/serve.js';

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
});
