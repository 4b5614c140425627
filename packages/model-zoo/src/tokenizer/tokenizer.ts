import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { UserError } from '@fastkernels/core';
import { z } from 'zod';
import { ChatTemplate, type ChatMessage } from './chat-template.js';

/** The fields of tokenizer_config.json this module reads (HF's special tokens are a string or an AddedToken object). */
const specialToken = z.union([z.string(), z.object({ content: z.string() }).loose()]).nullish();
const tokenizerConfigSchema = z
  .object({
    bos_token: specialToken,
    eos_token: specialToken,
    unk_token: specialToken,
    pad_token: specialToken,
    add_bos_token: z.boolean().optional(),
    chat_template: z.union([z.string(), z.array(z.object({ name: z.string(), template: z.string() }))]).nullish(),
  })
  .loose();
type TokenizerConfig = z.infer<typeof tokenizerConfigSchema>;

const tokenText = (t: z.infer<typeof specialToken>): string | undefined => (t == null ? undefined : typeof t === 'string' ? t : t.content);

const EMPTY = new Uint8Array(0);
const utf8 = new TextEncoder();

/** GPT-2's byte-to-unicode map, inverted: the byte each printable stand-in character of a byte-level token means. */
const UNICODE_TO_BYTE: ReadonlyMap<string, number> = (() => {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) (bs.push(b), cs.push(256 + n++));
  return new Map(bs.map((b, i) => [String.fromCodePoint(cs[i]!), b]));
})();

/**
 * A model folder's text tokenizer: tokenizer.json through @huggingface/tokenizers (HF's pure-JS port), the special
 * tokens and chat template from tokenizer_config.json (chat_template.jinja beside it wins, as in transformers).
 */
export class TextTokenizer {
  readonly eosTokenId: number | undefined;
  readonly bosToken: string | undefined;
  readonly eosToken: string | undefined;
  /** The ids of every special (added, `special: true`) token. */
  readonly specialIds: ReadonlySet<number>;
  readonly chatTemplate: ChatTemplate | null;
  /** Largest id the tokenizer can produce, + 1. */
  readonly vocabSize: number;

  /** Byte-level decoders only (GPT-2 style, Llama 3, Qwen): each token's bytes, built on first use (see tokenBytes). */
  private readonly byteLevel: boolean;
  private readonly bytesCache = new Map<number, Uint8Array>();

  constructor(
    private readonly tok: Tokenizer,
    config: TokenizerConfig,
    chatTemplate: string | null,
    decoderType: string | null = null,
  ) {
    this.byteLevel = decoderType === 'ByteLevel';
    this.bosToken = tokenText(config.bos_token);
    this.eosToken = tokenText(config.eos_token);
    this.eosTokenId = this.eosToken === undefined ? undefined : tok.token_to_id(this.eosToken);
    const special = new Set<number>();
    for (const [id, t] of tok.get_added_tokens_decoder()) if (t.special) special.add(id);
    this.specialIds = special;
    let max = -1;
    for (const id of tok.get_vocab(true).values()) max = Math.max(max, id);
    this.vocabSize = max + 1;
    this.chatTemplate = chatTemplate ? new ChatTemplate(chatTemplate, { bosToken: this.bosToken ?? '', eosToken: this.eosToken ?? '' }) : null;
  }

  /** Token ids of `text`; addSpecialTokens (default true) applies the post-processor (a BOS, typically). */
  encode(text: string, addSpecialTokens = true): number[] {
    return this.tok.encode(text, { add_special_tokens: addSpecialTokens }).ids;
  }

  decode(ids: readonly number[], skipSpecialTokens = true): string {
    if (!ids.length) return ''; // the library rejects an empty list
    return this.tok.decode([...ids], { skip_special_tokens: skipSpecialTokens, clean_up_tokenization_spaces: false });
  }

  /**
   * A token's UTF-8 bytes, independent of its neighbours, or null where the decoder is not byte-level (SentencePiece's
   * leading-space rules depend on context): streaming then feeds these to one TextDecoder, one table lookup a token
   * instead of two window decodes (52 µs a token with a 128k vocabulary, the event loop's budget at 9k tok/s). Special
   * tokens give an empty array when skipped.
   */
  tokenBytes(id: number, skipSpecialTokens = true): Uint8Array | null {
    if (!this.byteLevel) return null;
    if (this.specialIds.has(id)) return skipSpecialTokens ? EMPTY : utf8.encode(this.tok.id_to_token(id) ?? '');
    let b = this.bytesCache.get(id);
    if (!b) {
      const piece = this.tok.id_to_token(id);
      if (piece === undefined) return EMPTY;
      const added = this.tok.get_added_tokens_decoder().get(id);
      b = added ? utf8.encode(added.content) : Uint8Array.from([...piece].map((ch) => UNICODE_TO_BYTE.get(ch) ?? 0x3f));
      this.bytesCache.set(id, b);
    }
    return b;
  }

  idToToken(id: number): string | undefined {
    return this.tok.id_to_token(id);
  }

  /** The id of a token (a special token's text, e.g. a pad token), or undefined. */
  tokenToId(token: string): number | undefined {
    return this.tok.token_to_id(token);
  }

  /**
   * The chat prompt's token ids: the template rendered, then encoded without the post-processor's specials (the
   * template writes its own BOS, as transformers' apply_chat_template does).
   */
  encodeChat(messages: readonly ChatMessage[], addGenerationPrompt = true): number[] {
    if (!this.chatTemplate) throw new UserError('this model has no chat template (tokenizer_config.json has no chat_template)', { fix: 'use /v1/completions with a text prompt, or add a chat_template' });
    return this.encode(this.chatTemplate.render(messages, addGenerationPrompt), false);
  }
}

/**
 * Load the tokenizer of a model folder; null when the folder has no tokenizer.json (the model then works with token
 * ids only). A tokenizer whose ids do not fit the model's vocabulary is refused: its prompts would index past the
 * embedding table.
 */
export function loadTokenizer(dir: string, modelVocabSize?: number): TextTokenizer | null {
  const file = join(dir, 'tokenizer.json');
  if (!existsSync(file)) return null;
  return tokenizerFromJson(readJsonFile(file), dir, file, modelVocabSize);
}

/** A JSON file's value; an unreadable or invalid file is a UserError naming it. */
export function readJsonFile(p: string): unknown {
  try {
    return JSON.parse(readFileSync(p, 'utf8'));
  } catch (e) {
    throw new UserError(`cannot read ${p}: ${(e as Error).message}`, { file: p });
  }
}

/**
 * A TextTokenizer from a tokenizer.json value (read from `file`, or built in memory from other files, which `file`
 * then names for error messages) and the folder's tokenizer_config.json / chat_template.jinja. `configOverride`, when
 * given, replaces tokenizer_config.json (a caller that has already merged the folder's special-token files).
 */
export function tokenizerFromJson(json: unknown, dir: string, file: string, modelVocabSize?: number, configOverride?: Record<string, unknown>): TextTokenizer {
  const cfgPath = join(dir, 'tokenizer_config.json');
  const parsed = tokenizerConfigSchema.safeParse(configOverride ?? (existsSync(cfgPath) ? readJsonFile(cfgPath) : {}));
  if (!parsed.success) throw new UserError(`${cfgPath}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  const config = parsed.data;
  let tok: Tokenizer;
  try {
    tok = new Tokenizer(json as object, config);
  } catch (e) {
    throw new UserError(`${file} is not a tokenizer this version can read: ${(e as Error).message}`);
  }
  const jinjaPath = join(dir, 'chat_template.jinja');
  let template: string | null = null;
  if (existsSync(jinjaPath)) template = readFileSync(jinjaPath, 'utf8');
  else if (typeof config.chat_template === 'string') template = config.chat_template;
  else if (Array.isArray(config.chat_template)) template = config.chat_template.find((t) => t.name === 'default')?.template ?? config.chat_template[0]?.template ?? null;
  const decoder = (json as { decoder?: { type?: string } | null }).decoder;
  const t = new TextTokenizer(tok, config, template, decoder?.type ?? null);
  if (modelVocabSize !== undefined && t.vocabSize > modelVocabSize) {
    throw new UserError(`${file} has ids up to ${t.vocabSize - 1}, beyond the model's vocab_size ${modelVocabSize}`, { fix: 'use the tokenizer that belongs to this model' });
  }
  return t;
}
