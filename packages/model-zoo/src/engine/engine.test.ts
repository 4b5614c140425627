import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { baselineRegistry } from '../index.js';
import { BlockManager } from './block-manager.js';
import { getForwardContext, hasForwardContext, withForwardContext, type ForwardContext } from './forward-context.js';
import { generate } from './generate.js';
import { KvCache } from './kv-cache.js';
import { loadModel } from '../models/load-model.js';
import { ModelRunner } from './model-runner.js';
import { parsePromptJsonl } from './prompts.js';
import { DEFAULT_SAMPLING, Sequence } from './sequence.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');
const greedy = (maxTokens: number) => ({ ...DEFAULT_SAMPLING, maxTokens });

describe('BlockManager', () => {
  it('allocates ceil(tokens / 16) blocks, appends a block when a token starts one, frees them all', () => {
    const bm = new BlockManager(4);
    const s = new Sequence(0, new Array(16).fill(1), greedy(40));
    expect(bm.canAllocate(s)).toBe(true);
    bm.allocate(s);
    expect(s.blockTable).toEqual([0]);
    expect(bm.slot(s, 15)).toBe(15);
    s.appendToken(3); // token 17 needs a second block
    expect(bm.canAppend(s)).toBe(true);
    bm.mayAppend(s);
    expect(s.blockTable).toEqual([0, 1]);
    expect(bm.slot(s, 16)).toBe(16);
    s.appendToken(4);
    bm.mayAppend(s);
    expect(s.blockTable.length).toBe(2);
    const big = new Sequence(1, new Array(49).fill(1), greedy(1));
    expect(bm.canAllocate(big)).toBe(false); // 4 blocks needed, 2 free
    expect(() => bm.allocate(big)).toThrow(/needs 4 blocks, 2 free/);
    bm.deallocate(s);
    expect(s.blockTable).toEqual([]);
    expect(bm.numFreeBlocks).toBe(4);
    bm.allocate(big);
    expect(big.blockTable).toEqual([0, 1, 2, 3]);
  });

  it('Sequence finishes at max tokens', () => {
    const s = new Sequence(0, [1, 2], greedy(2));
    s.appendToken(5);
    expect(s.isFinished).toBe(false);
    s.appendToken(6);
    expect(s.isFinished).toBe(true);
    expect(s.completionTokenIds).toEqual([5, 6]);
  });
});

describe('forward context', () => {
  it('is scoped by withForwardContext and explains itself when absent', () => {
    expect(hasForwardContext()).toBe(false);
    expect(() => getForwardContext()).toThrow(/no forward context/);
    const fc = { attnMetadata: {} as never, kvCaches: [] } as ForwardContext;
    expect(withForwardContext(fc, () => getForwardContext())).toBe(fc);
    expect(hasForwardContext()).toBe(false);
  });
});

describe('ModelRunner', () => {
  it('a mixed step (one prefill + one decode) samples what separate runs do', () => {
    const m = loadModel(join(FIXTURES, 'tiny-mistral'), { backend: cpuBackend(), registry: baselineRegistry(), dtype: 'f32' });
    const A = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5];
    const B = [2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5, 9, 0, 4, 5, 2, 3];
    const ref = generate(m.model, m.ctx, m.geometry, [{ promptIds: A }, { promptIds: B }], { maxTokens: 2 }).outputs.map((o) => o.tokenIds);
    const cache = new KvCache(cpuBackend(), 0, { numLayers: 2, numKvHeads: 2, headDim: 16, blockSize: 16, dtype: 'f32' }, 6);
    const bm = new BlockManager(6);
    const runner = new ModelRunner(m.model, m.ctx, cache, bm);
    const a = new Sequence(0, A, greedy(4));
    const b = new Sequence(1, B, greedy(4));
    bm.allocate(a);
    a.appendToken(runner.run([a], []).tokens[0]!);
    bm.mayAppend(a);
    bm.allocate(b);
    const mixed = runner.run([b], [a]).tokens; // prefill b, decode a, one step
    expect([a.completionTokenIds[0], mixed[1]]).toEqual(ref[0]);
    expect(mixed[0]).toBe(ref[1]![0]);
    runner.dispose();
    cache.dispose();
    m.model.dispose();
  });
});

describe('prompt files', () => {
  it('parses JSONL and names the file and line of a bad one', () => {
    expect(parsePromptJsonl('{"prompt_ids":[1,2]}\n\n{"prompt_ids":[3],"max_tokens":5}\n', 'p.jsonl')).toEqual([
      { promptIds: [1, 2], where: 'p.jsonl line 1' },
      { promptIds: [3], maxTokens: 5, where: 'p.jsonl line 3' },
    ]);
    expect(() => parsePromptJsonl('{"prompt_ids":[1]}\n{"prompt_ids":[]}', 'p.jsonl')).toThrow(/p.jsonl line 2: prompt_ids: /);
    expect(() => parsePromptJsonl('{"prompt_ids":[1]}\nnope', 'p.jsonl')).toThrow(/p.jsonl line 2: not valid JSON/);
    expect(() => parsePromptJsonl('{"prompt_ids":[1], "max_tokens": 0}', 'p.jsonl')).toThrow(/line 1: max_tokens/);
    expect(() => parsePromptJsonl('\n', 'p.jsonl')).toThrow(/holds no prompts/);
  });
});
