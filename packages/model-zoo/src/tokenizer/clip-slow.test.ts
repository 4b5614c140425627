/**
 * CLIP's slow tokenizer files (vocab.json + merges.txt), as FLUX.1-dev ships tokenizer/: ids worked out by hand for the
 * tiny fixture, the same ids as a CLIPTokenizerFast-shaped tokenizer.json of the same vocabulary, the same ids as a
 * direct implementation of the slow CLIPTokenizer's algorithm on random text, FluxPipeline's padding, and the
 * UserErrors of broken files.
 */
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { userError } from '../../test/user-error.js';
import { encodePadded, loadFluxTokenizers } from '../families/vision-video-audio/pipeline/text-to-image.js';
import type { FluxPipelineConfig } from '../families/vision-video-audio/pipeline/model-index.js';
import { CLIP_SPLIT_PATTERN, hasSlowClipFiles, loadSlowClipTokenizer, slowClipTokenizerJson } from './clip-slow.js';
import { loadTokenizer } from './tokenizer.js';

const FIXTURES = join(import.meta.dirname, '../../fixtures');
const SLOW = join(FIXTURES, 'tiny-clip-slow');
const FAST = join(FIXTURES, 'tiny-clip-fast');
const tmp = mkdtempSync(join(tmpdir(), 'fk-clip-slow-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

// the fixture's ids (vocab.json)
const V = { a: 0, b: 1, c: 2, 'a</w>': 3, 'b</w>': 4, 'c</w>': 5, ab: 6, 'bc</w>': 7, 'abc</w>': 8, '!</w>': 9, 'Ã©</w>': 12, '1</w>': 13, bos: 14, eos: 15 } as const;
const UNK = 15; // <|endoftext|>, CLIP's unk

/** A copy of the slow fixture under tmp, with some files replaced. */
function slowCopy(name: string, files: Record<string, string> = {}): string {
  const dir = join(tmp, name);
  cpSync(SLOW, dir, { recursive: true });
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
  return dir;
}

describe('CLIP tokenizer from vocab.json + merges.txt', () => {
  const slow = loadSlowClipTokenizer(SLOW, 16);

  it('gives the ids worked out by hand: lowercase, NFC, whitespace, "</w>" word ends, merge ranks, unknowns, bos / eos', () => {
    // "ABC" -> "abc" -> a b c</w>: (b, c</w>) has rank 0 and goes first, then (a, bc</w>) rank 2 -> abc</w>
    expect(slow.tokenizer.encode('ABC', false)).toEqual([V['abc</w>']]);
    // a b b</w>: only (a, b) is a merge -> ab, b</w>;  a b b c</w>: b c</w> first, then a b -> ab, bc</w>
    expect(slow.tokenizer.encode('abb abbc', false)).toEqual([V.ab, V['b</w>'], V.ab, V['bc</w>']]);
    // a word ending in a: a</w>, not a; no (a, b</w>) merge
    expect(slow.tokenizer.encode('a ab', false)).toEqual([V['a</w>'], V.a, V['b</w>']]);
    // "E" + U+0301 -> NFC "É" -> "é" -> bytes c3 a9 -> "Ã" "©</w>" -> merged; "!" its own word; digits one a word;
    // "d</w>" is in no vocabulary entry -> the unk token; tabs / runs of spaces are word breaks only
    expect(slow.tokenizer.encode('ABC  abb!\tE\u0301 1d')).toEqual([V.bos, V['abc</w>'], V.ab, V['b</w>'], V['!</w>'], V['Ã©</w>'], V['1</w>'], UNK, V.eos]);
    expect(slow.tokenizer.encode('')).toEqual([V.bos, V.eos]);
    // digits are words of one: "11" is 1</w> 1</w>
    expect(slow.tokenizer.encode('11', false)).toEqual([V['1</w>'], V['1</w>']]);
    expect(slow.modelMaxLength).toBe(12);
    expect(slow.specials).toEqual({ bos_token: '<|startoftext|>', eos_token: '<|endoftext|>', unk_token: '<|endoftext|>', pad_token: '<|endoftext|>' });
    expect(slow.tokenizer.eosTokenId).toBe(V.eos);
    expect([...slow.tokenizer.specialIds].sort()).toEqual([14, 15]);
    expect(slow.tokenizer.decode(slow.tokenizer.encode('abc abb'))).toBe('abc abb');
  });

  it('the merge order matters: the same merges with (a, b) ranked first give ab c</w> for "abc"', () => {
    const dir = slowCopy('swapped', { 'merges.txt': '#version: 0.2\na b\nb c</w>\na bc</w>\nÃ ©</w>\n' });
    expect(loadSlowClipTokenizer(dir).tokenizer.encode('abc', false)).toEqual([V.ab, V['c</w>']]);
  });

  it('gives the same ids as a CLIPTokenizerFast tokenizer.json of the same vocabulary, and as the slow algorithm, on random text', () => {
    const fast = loadTokenizer(FAST, 16)!;
    const vocab = JSON.parse(readFileSync(join(SLOW, 'vocab.json'), 'utf8')) as Record<string, number>;
    const merges = readFileSync(join(SLOW, 'merges.txt'), 'utf8').trim().split('\n').slice(1).map((l) => l.split(' ') as [string, string]);
    const pieces = ['a', 'b', 'c', 'A', 'B', 'C', 'd', ' ', '  ', '\t', '\n', '!', '!?', '1', '11', '23', 'é', 'E\u0301', "'s", "'", 'x'];
    const rng = new Rng(Date.now() % 100000);
    for (let n = 0; n < 300; n++) {
      const text = Array.from({ length: rng.int(0, 16) }, () => pieces[rng.int(0, pieces.length)]!).join('');
      const want = slowClipReference(text, vocab, merges);
      expect(slow.tokenizer.encode(text), JSON.stringify(text)).toEqual(want);
      expect(fast.encode(text), JSON.stringify(text)).toEqual(want);
    }
  });

  it('is what FluxPipeline reads from tokenizer/: padded with <|endoftext|> to model_max_length, truncated keeping bos / eos', () => {
    const dir = join(tmp, 'pipe');
    mkdirSync(dir);
    cpSync(SLOW, join(dir, 'tokenizer'), { recursive: true });
    cpSync(join(FIXTURES, 'tiny-flux', 'tokenizer_2'), join(dir, 'tokenizer_2'), { recursive: true });
    const cfg = { textEncoder: { vocabSize: 16 }, textEncoder2: { vocabSize: 259 } } as unknown as FluxPipelineConfig;
    expect(hasSlowClipFiles(join(dir, 'tokenizer'))).toBe(true);
    const tok = loadFluxTokenizers(dir, cfg);
    expect(tok.clip.modelMaxLength).toBe(12);
    expect(tok.clip.padId).toBe(UNK);
    const len = tok.clip.modelMaxLength!;
    expect(encodePadded(tok.clip, 'ABC abb', len)).toEqual([V.bos, V['abc</w>'], V.ab, V['b</w>'], V.eos, 15, 15, 15, 15, 15, 15, 15]);
    expect(encodePadded(tok.clip, 'abc abb abc abbc', 5)).toEqual([V.bos, V['abc</w>'], V.ab, V['b</w>'], V.eos]);
    // the same folder with the fast file: the same ids
    const fastDir = join(tmp, 'pipe-fast');
    cpSync(dir, fastDir, { recursive: true });
    for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(FAST, f), join(fastDir, 'tokenizer', f));
    expect(hasSlowClipFiles(join(fastDir, 'tokenizer'))).toBe(false);
    const fastTok = loadFluxTokenizers(fastDir, cfg);
    for (const text of ['ABC abb', 'E\u0301 1d!', 'abc abb abc abbc abc abc abc abc abc abc abc']) expect(encodePadded(fastTok.clip, text, len)).toEqual(encodePadded(tok.clip, text, len));
    // a vocabulary larger than CLIPTextModel's is refused
    expect(userError(() => loadFluxTokenizers(dir, { ...cfg, textEncoder: { vocabSize: 15 } } as unknown as FluxPipelineConfig)).message).toMatch(/vocab.json \+ merges.txt has ids up to 15, beyond the model's vocab_size 15/);
  });

  it('builds the tokenizer.json shape CLIPTokenizerFast saves', () => {
    const { json } = slowClipTokenizerJson(SLOW);
    const model = json.model as { type: string; end_of_word_suffix: string; unk_token: string; merges: string[][]; fuse_unk: boolean };
    expect(model.type).toBe('BPE');
    expect(model.end_of_word_suffix).toBe('</w>');
    expect(model.unk_token).toBe('<|endoftext|>');
    expect(model.fuse_unk).toBe(false);
    expect(model.merges).toEqual([['b', 'c</w>'], ['a', 'b'], ['a', 'bc</w>'], ['Ã', '©</w>']]);
    // the whitespace Replace changes no id (the split drops spaces anyway), only offsets: checked as structure
    expect((json.normalizer as { normalizers: unknown[] }).normalizers).toEqual([{ type: 'NFC' }, { type: 'Replace', pattern: { Regex: '\\s+' }, content: ' ' }, { type: 'Lowercase' }]);
    expect(json.post_processor).toMatchObject({ type: 'RobertaProcessing', cls: ['<|startoftext|>', 14], sep: ['<|endoftext|>', 15] });
    expect((json.pre_tokenizer as { pretokenizers: { pattern?: { Regex: string } }[] }).pretokenizers[0]!.pattern!.Regex).toBe(CLIP_SPLIT_PATTERN);
  });

  it('a broken vocab.json / merges.txt / tokenizer_config.json is a UserError naming the file and the fix', () => {
    const cases: [Record<string, string>, RegExp, RegExp][] = [
      [{ 'vocab.json': '{"a": 0, "b": ' }, /tiny-bad-0\/vocab.json.*it must be JSON/, /take the file again/],
      [{ 'vocab.json': '["a", "b"]' }, /vocab.json is not a BPE vocabulary/, /take the file again/],
      [{ 'vocab.json': '{"a": 0, "b": "1"}' }, /vocab.json is not a BPE vocabulary .*"b"/, /take the file again/],
      [{ 'vocab.json': '{"a": 0, "b": 0}' }, /vocab.json gives id 0 to both "a" and "b"/, /take the file again/],
      [{ 'vocab.json': '{"a": 0, "b": 1, "c": 2, "<|endoftext|>": 3}' }, /vocab.json has no id for the bos_token "<\|startoftext\|>"/, /name a token it has as bos_token/],
      [{ 'merges.txt': 'b c</w>\na b\n' }, /merges.txt line 1 is not the "#version: ..." header/, /#version: 0.2/],
      [{ 'merges.txt': '#version: 0.2\nb c</w>\na b c\n' }, /merges.txt line 3 is not a merge "left right"/, /take the file again/],
      [{ 'merges.txt': '#version: 0.2\nb c</w>\nc a\n' }, /merges.txt line 3 \("c a"\) makes or uses "ca", which .*vocab.json has no id for/, /must come from the same tokenizer/],
      [{ 'tokenizer_config.json': '{"model_max_length": "77"}' }, /tokenizer_config.json is not a tokenizer config: "model_max_length"/, /model_max_length a number/],
      [{ 'tokenizer_config.json': '{"do_lower_case": "yes"}' }, /tokenizer_config.json is not a tokenizer config: "do_lower_case"/, /do_lower_case a boolean/],
    ];
    cases.forEach(([files, message, fix], i) => {
      const e = userError(() => loadSlowClipTokenizer(slowCopy(`tiny-bad-${i}`, files)));
      expect(e.message).toMatch(message);
      expect(e.details.file).toMatch(new RegExp(`tiny-bad-${i}/${Object.keys(files)[0]!.replace('.', '\\.')}$`));
      expect(e.details.fix).toMatch(fix);
    });
    const noMerges = slowCopy('no-merges');
    rmSync(join(noMerges, 'merges.txt'));
    expect(hasSlowClipFiles(noMerges)).toBe(false);
    expect(userError(() => loadSlowClipTokenizer(noMerges)).message).toMatch(/no-merges\/merges.txt is missing/);
  });
});

/** GPT-2's byte-to-unicode map (bytes that print stand for themselves, the rest from U+0100 on). */
function byteToUnicode(): string[] {
  const keep = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const out: string[] = [];
  let n = 0;
  for (let b = 0; b < 256; b++) out.push(String.fromCodePoint(keep(b) ? b : 256 + n++));
  return out;
}

/**
 * The slow CLIPTokenizer's algorithm written out (without ftfy / html unescaping, which the fast one has not either):
 * clean the text, find CLIP's words, byte-encode each, merge the lowest-ranked adjacent pair everywhere until none is
 * left, look the pieces up (unknown -> unk), wrap in bos / eos.
 */
function slowClipReference(text: string, vocab: Record<string, number>, merges: [string, string][]): number[] {
  const b2u = byteToUnicode();
  const rank = new Map(merges.map(([a, b], i) => [`${a} ${b}`, i]));
  const clean = text.normalize('NFC').replace(/\s+/gu, ' ').toLowerCase();
  const ids = [vocab['<|startoftext|>']!];
  for (const word of clean.match(/'s|'t|'re|'ve|'m|'ll|'d|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+/gu) ?? []) {
    let sym = [...new TextEncoder().encode(word)].map((b) => b2u[b]!);
    sym[sym.length - 1] += '</w>';
    for (;;) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i + 1 < sym.length; i++) {
        const r = rank.get(`${sym[i]} ${sym[i + 1]}`);
        if (r !== undefined && r < bestRank) (bestRank = r), (best = i);
      }
      if (best < 0) break;
      const [a, b] = [sym[best]!, sym[best + 1]!];
      const next: string[] = [];
      for (let i = 0; i < sym.length; i++) {
        if (i + 1 < sym.length && sym[i] === a && sym[i + 1] === b) next.push(a + b), i++;
        else next.push(sym[i]!);
      }
      sym = next;
    }
    for (const s of sym) ids.push(vocab[s] ?? vocab['<|endoftext|>']!);
  }
  ids.push(vocab['<|endoftext|>']!);
  return ids;
}
