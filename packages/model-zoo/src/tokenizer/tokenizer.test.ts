import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { IncrementalDetokenizer, StopStringMatcher, loadTokenizer } from './index.js';

const CHAT = join(import.meta.dirname, '../../fixtures/tiny-llama-chat');

describe('loadTokenizer (the byte-level fixture)', () => {
  const tok = loadTokenizer(CHAT, 256)!;

  it('round-trips text, with a BOS from the post-processor, and knows its special tokens', () => {
    const ids = tok.encode('Hello wörld 🙂');
    expect(ids[0]).toBe(1);
    expect(ids.length).toBe(1 + Buffer.byteLength('Hello wörld 🙂')); // one token a byte
    expect(tok.decode(ids)).toBe('Hello wörld 🙂');
    expect(tok.decode(ids, false)).toBe('<s>Hello wörld 🙂');
    expect(tok.eosTokenId).toBe(4);
    expect([...tok.specialIds].sort()).toEqual([0, 1, 2, 3, 4]);
    expect(tok.vocabSize).toBe(256);
  });

  it('renders the chat template and encodes it without a second BOS', () => {
    const ids = tok.encodeChat([{ role: 'user', content: 'hi' }]);
    expect(tok.decode(ids, false)).toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
    expect(ids[0]).toBe(3);
  });

  it('is null for a folder without tokenizer.json, and refuses one larger than the model vocabulary', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fk-tok-'));
    expect(loadTokenizer(dir)).toBeNull();
    copyFileSync(join(CHAT, 'tokenizer.json'), join(dir, 'tokenizer.json'));
    expect(() => loadTokenizer(dir, 128)).toThrow(/beyond the model's vocab_size 128/);
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: '{{ raise_exception("no system role") }}' }));
    expect(() => loadTokenizer(dir)!.encodeChat([{ role: 'system', content: 'x' }])).toThrow(/rejected the messages: no system role/);
  });
});

describe('IncrementalDetokenizer', () => {
  const tok = loadTokenizer(CHAT)!;

  it('never splits a UTF-8 character across chunks, and the chunks add up to the whole decode', () => {
    const text = 'añb 🙂 c€';
    const ids = tok.encode(text, false);
    const d = new IncrementalDetokenizer(tok);
    const chunks = ids.map((id) => d.push(id));
    expect(chunks.every((c) => !c.includes('\uFFFD'))).toBe(true);
    expect(chunks.join('') + d.flush()).toBe(text);
    expect(chunks.filter((c) => c === '').length).toBe(1 + 3 + 2); // held-back continuation bytes
  });

  it('both paths (byte-level table, generic window decode) add up to the whole decode, for any ids', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fk-tok-seq-'));
    const json = JSON.parse(readFileSync(join(CHAT, 'tokenizer.json'), 'utf8')) as { decoder: unknown };
    json.decoder = { type: 'Sequence', decoders: [json.decoder] }; // same output, not recognised as byte-level
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(json));
    copyFileSync(join(CHAT, 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
    const generic = loadTokenizer(dir)!;
    expect(generic.tokenBytes(65)).toBeNull();
    expect(tok.tokenBytes(65)).toEqual(Uint8Array.of(65));
    let x = 7;
    const ids = Array.from({ length: 300 }, () => ((x = (x * 1103515245 + 12345) % 2 ** 31), x % 256));
    for (const t of [tok, generic]) {
      const d = new IncrementalDetokenizer(t);
      expect(ids.map((id) => d.push(id)).join('') + d.flush()).toBe(t.decode(ids));
    }
  });

  it('skips special tokens and emits an invalid byte once more text follows', () => {
    const d = new IncrementalDetokenizer(tok);
    const out = [4, 0x80, 0x61, 0x62].map((id) => d.push(id)).join('') + d.flush();
    expect(out).toBe('\uFFFDab');
  });
});

describe('StopStringMatcher', () => {
  it('holds back a possible stop-string start and cuts at the first match', () => {
    const m = new StopStringMatcher(['STOP', 'xy']);
    expect(m.push('abcST')).toBe('abc');
    expect(m.push('OPdef')).toBe('');
    expect(m.stopped).toBe(true);
    expect(m.push('more')).toBe('');
  });

  it('releases held text when it stops being a prefix, and at the end', () => {
    const m = new StopStringMatcher(['STOP']);
    expect(m.push('aS')).toBe('a');
    expect(m.push('T')).toBe('');
    expect(m.push('x')).toBe('STx');
    expect(m.push('ST')).toBe('');
    expect(m.flush()).toBe('ST');
    expect(m.stopped).toBe(false);
  });
});
