import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UserError } from '@fastkernels/core';
import { runGenerate, type GenerateArgs } from './generate.js';

const FIXTURES = join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures');
const base: Omit<GenerateArgs, 'model'> = { maxTokens: 4, temperature: 0, topK: 0, topP: 1, seed: 0, backend: 'cpu', dtype: 'f32', initSeed: 0 };

async function run(args: GenerateArgs): Promise<{ out: string; err: string }> {
  let out = '';
  let err = '';
  await runGenerate(args, { out: (s) => (out += s), err: (s) => (err += s) }, []);
  return { out, err };
}

describe('generate --prompt (text through the folder\'s tokenizer)', () => {
  it('encodes the text with its BOS, and gives the same tokens as the equivalent --prompt-ids, with their text', async () => {
    const model = join(FIXTURES, 'tiny-llama-chat');
    const text = JSON.parse((await run({ ...base, model, prompt: 'Hi', json: true })).out) as { outputs: { prompt_ids: number[]; token_ids: number[]; text: string }[] };
    expect(text.outputs[0]!.prompt_ids).toEqual([1, 72, 105]);
    const ids = JSON.parse((await run({ ...base, model, promptIds: '1,72,105', json: true })).out) as typeof text;
    expect(ids.outputs[0]!.token_ids).toEqual(text.outputs[0]!.token_ids);
    expect(typeof text.outputs[0]!.text).toBe('string');
  });

  it('on a folder without tokenizer.json: --prompt is a flag error naming the fix, ids keep working and say so', async () => {
    const model = join(FIXTURES, 'tiny-llama');
    const e = await run({ ...base, model, prompt: 'Hi' }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(UserError);
    expect((e as UserError).details.field).toBe('--prompt');
    expect((e as UserError).describe()).toMatch(/no tokenizer\.json[\s\S]*--prompt-ids/);
    const r = await run({ ...base, model, promptIds: '1,2,3' });
    expect(r.err).toMatch(/no tokenizer\.json: token ids in and out/);
    expect(r.out).toMatch(/^0: \d+(,\d+){3}\n$/);
  });
});
