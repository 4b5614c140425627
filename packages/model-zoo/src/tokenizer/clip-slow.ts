/**
 * CLIP's tokenizer from its slow files (vocab.json + merges.txt + tokenizer_config.json / special_tokens_map.json), as
 * FLUX.1-dev ships it in tokenizer/: we build in memory the tokenizer.json that transformers' CLIPTokenizerFast
 * converts these files to, and load it with the same library as any tokenizer.json. That tokenizer:
 *
 * - normalizer: NFC, runs of whitespace to one space, lowercase (CLIP lowercases always: the slow CLIPTokenizer calls
 *   .lower() and the converter adds Lowercase whatever do_lower_case says, and CLIP's vocabulary is lowercase only);
 * - pre-tokenizer: CLIP's split (contractions, letter runs, single digits, runs of other non-space characters; the
 *   spaces dropped), then byte-level (GPT-2's byte-to-unicode map, no prefix space);
 * - model: BPE over vocab.json and merges.txt's ranks, "</w>" appended to each word's last symbol, one unk token per
 *   unknown symbol (no fusing), no dropout;
 * - post-processor: <|startoftext|> text <|endoftext|> (RobertaProcessing with bos as cls and eos as sep);
 * - decoder: byte-level (the library turns "</w>" back into spaces, as CLIPTokenizerFast's decode does).
 *
 * merges.txt is read as the slow CLIPTokenizer reads it: the first line is the "#version" header, then at most
 * 49152 - 256 - 2 merges (CLIP's count; a longer file's tail is ignored, as there).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '@fastkernels/core';
import { z } from 'zod';
import { readJsonFile, tokenizerFromJson, type TextTokenizer } from './tokenizer.js';

/** The split CLIPConverter gives its Split pre-tokenizer (Oniguruma / JS `u` syntax). */
export const CLIP_SPLIT_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+";
/** The merge count the slow CLIPTokenizer keeps at most (CLIP's vocabulary: 256 bytes x 2 + merges + 2 specials). */
export const CLIP_MAX_MERGES = 49152 - 256 - 2;

/** transformers' CLIPTokenizer defaults, where neither tokenizer_config.json nor special_tokens_map.json names one. */
const CLIP_DEFAULTS = { bos_token: '<|startoftext|>', eos_token: '<|endoftext|>', unk_token: '<|endoftext|>', pad_token: '<|endoftext|>' } as const;
type SpecialName = keyof typeof CLIP_DEFAULTS;
const SPECIAL_NAMES = Object.keys(CLIP_DEFAULTS) as SpecialName[];

const specialToken = z.union([z.string(), z.looseObject({ content: z.string() })]).nullish();
const ConfigSchema = z.looseObject({
  bos_token: specialToken,
  eos_token: specialToken,
  unk_token: specialToken,
  pad_token: specialToken,
  model_max_length: z.number().nullish(),
  do_lower_case: z.boolean().nullish(),
});
const SpecialMapSchema = z.looseObject({ bos_token: specialToken, eos_token: specialToken, unk_token: specialToken, pad_token: specialToken });
const VocabSchema = z.record(z.string(), z.number().int().nonnegative());

const text = (t: z.infer<typeof specialToken>): string | undefined => (t == null ? undefined : typeof t === 'string' ? t : t.content);

function parseFile<T>(schema: z.ZodType<T>, file: string, what: string, fix: string): T {
  let raw: unknown;
  try {
    raw = readJsonFile(file);
  } catch (e) {
    throw new UserError(`${(e as Error).message} (it must be JSON: ${what})`, { file, fix });
  }
  const r = schema.safeParse(raw);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.map(String).join('.');
  throw new UserError(`${file} is not ${what}: ${field ? `${JSON.stringify(field)}: ` : ''}${issue.message}`, { file, ...(field ? { field } : {}), fix });
}

/** Whether a folder holds CLIP's slow tokenizer files (and no tokenizer.json). */
export function hasSlowClipFiles(dir: string): boolean {
  return !existsSync(join(dir, 'tokenizer.json')) && existsSync(join(dir, 'vocab.json')) && existsSync(join(dir, 'merges.txt'));
}

export interface SlowClipTokenizer {
  /** The tokenizer.json value CLIPTokenizerFast would save for these files. */
  readonly json: Record<string, unknown>;
  /** The special tokens (tokenizer_config.json, then special_tokens_map.json, then CLIPTokenizer's defaults). */
  readonly specials: Readonly<Record<SpecialName, string>>;
  /** tokenizer_config.json's model_max_length (transformers' "no limit", >= 1e9, is null). */
  readonly modelMaxLength: number | null;
}

/** Build CLIPTokenizerFast's tokenizer.json from a folder's vocab.json + merges.txt (+ tokenizer_config.json, special_tokens_map.json). */
export function slowClipTokenizerJson(dir: string): SlowClipTokenizer {
  const vocabFile = join(dir, 'vocab.json');
  const mergesFile = join(dir, 'merges.txt');
  const cfgFile = join(dir, 'tokenizer_config.json');
  const mapFile = join(dir, 'special_tokens_map.json');
  const refetch = "take the file again from the model's tokenizer/ folder (or save the tokenizer with transformers' save_pretrained)";
  for (const f of [vocabFile, mergesFile]) if (!existsSync(f)) throw new UserError(`${f} is missing: CLIP's slow tokenizer is vocab.json + merges.txt`, { file: f, fix: `${refetch}, or put a tokenizer.json in ${dir}` });

  const vocab = parseFile(VocabSchema, vocabFile, 'a BPE vocabulary (a JSON object of token -> non-negative integer id)', refetch);
  const byId = new Map<number, string>();
  for (const [tok, id] of Object.entries(vocab)) {
    const other = byId.get(id);
    if (other !== undefined) throw new UserError(`${vocabFile} gives id ${id} to both ${JSON.stringify(other)} and ${JSON.stringify(tok)}`, { file: vocabFile, field: tok, fix: refetch });
    byId.set(id, tok);
  }

  const cfg = existsSync(cfgFile) ? parseFile(ConfigSchema, cfgFile, 'a tokenizer config', 'special tokens are strings or {"content": ...}, model_max_length a number, do_lower_case a boolean') : {};
  const map = existsSync(mapFile) ? parseFile(SpecialMapSchema, mapFile, 'a special-tokens map', 'special tokens are strings or {"content": ...}') : {};
  const specials = {} as Record<SpecialName, string>;
  for (const name of SPECIAL_NAMES) {
    const tok = text((cfg as Record<string, z.infer<typeof specialToken>>)[name]) ?? text((map as Record<string, z.infer<typeof specialToken>>)[name]) ?? CLIP_DEFAULTS[name];
    if (vocab[tok] === undefined) {
      throw new UserError(`${vocabFile} has no id for the ${name} ${JSON.stringify(tok)}`, { file: vocabFile, field: name, fix: `CLIP's vocab.json ends with <|startoftext|> and <|endoftext|>; ${refetch}, or name a token it has as ${name} in ${cfgFile}` });
    }
    specials[name] = tok;
  }

  const lines = readFileSync(mergesFile, 'utf8').replace(/\r\n/g, '\n').trim().split('\n');
  if (!lines[0]?.startsWith('#')) {
    throw new UserError(`${mergesFile} line 1 is not the "#version: ..." header (${JSON.stringify(lines[0]?.slice(0, 40) ?? '')})`, {
      file: mergesFile,
      fix: `transformers' CLIPTokenizer skips line 1 whatever it holds: put "#version: 0.2" above the first merge, or ${refetch}`,
    });
  }
  const merges: [string, string][] = [];
  const body = lines.slice(1, 1 + CLIP_MAX_MERGES);
  for (let i = 0; i < body.length; i++) {
    const line = body[i]!;
    const parts = line.split(' ');
    const where = `${mergesFile} line ${i + 2}`;
    if (parts.length !== 2 || !parts[0] || !parts[1]) throw new UserError(`${where} is not a merge "left right" (two tokens and one space): ${JSON.stringify(line.slice(0, 60))}`, { file: mergesFile, fix: refetch });
    const [a, b] = parts as [string, string];
    // the fast tokenizer refuses a merge whose parts or result have no id (its BPE builder's MergeTokenOutOfVocabulary)
    for (const t of [a, b, a + b]) if (vocab[t] === undefined) throw new UserError(`${where} (${JSON.stringify(line)}) makes or uses ${JSON.stringify(t)}, which ${vocabFile} has no id for`, { file: mergesFile, fix: `vocab.json and merges.txt must come from the same tokenizer: ${refetch}` });
    merges.push([a, b]);
  }

  const specialIds = new Set(SPECIAL_NAMES.map((n) => vocab[specials[n]]!));
  const addedTokens = [...specialIds].sort((x, y) => x - y).map((id) => ({ id, content: byId.get(id)!, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  const json = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: { type: 'Sequence', normalizers: [{ type: 'NFC' }, { type: 'Replace', pattern: { Regex: '\\s+' }, content: ' ' }, { type: 'Lowercase' }] },
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: CLIP_SPLIT_PATTERN }, behavior: 'Removed', invert: true },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
      ],
    },
    post_processor: { type: 'RobertaProcessing', sep: [specials.eos_token, vocab[specials.eos_token]], cls: [specials.bos_token, vocab[specials.bos_token]], trim_offsets: false, add_prefix_space: false },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: specials.unk_token, continuing_subword_prefix: '', end_of_word_suffix: '</w>', fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
  };
  const mml = (cfg as { model_max_length?: number | null }).model_max_length;
  return { json, specials, modelMaxLength: mml && mml < 1e9 ? mml : null };
}

/** CLIP's tokenizer from a folder's slow files (see the file comment), with the resolved special tokens. */
export function loadSlowClipTokenizer(dir: string, modelVocabSize?: number): SlowClipTokenizer & { tokenizer: TextTokenizer } {
  const slow = slowClipTokenizerJson(dir);
  const tokenizer = tokenizerFromJson(slow.json, dir, `${join(dir, 'vocab.json')} + merges.txt`, modelVocabSize, { ...slow.specials });
  return { ...slow, tokenizer };
}
