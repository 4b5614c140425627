import type { TextTokenizer } from './tokenizer.js';

/**
 * Streaming detokenisation (vLLM's detokenize_incrementally): each new token's text is the decode of a short window
 * of recent tokens minus the decode of the same window without it, so tokenizers whose decoders depend on context
 * (SentencePiece's leading space, byte-level pieces) come out the same as decoding the whole output at once. A delta
 * that ends in U+FFFD is held back: the token is part of a multi-byte UTF-8 character whose other bytes have not
 * arrived, so no chunk ever carries half a character.
 */
export class IncrementalDetokenizer {
  private readonly ids: number[] = [];
  /** Start of the window decoded as context. */
  private prefixOffset = 0;
  /** Tokens up to here have been emitted as text. */
  private readOffset = 0;
  /** All text emitted so far. */
  text = '';
  /** Byte-level tokenizers: one streaming UTF-8 decoder over the tokens' bytes (it holds incomplete characters). */
  private readonly utf8 = new TextDecoder('utf-8', { fatal: false });

  constructor(
    private readonly tok: TextTokenizer,
    private readonly skipSpecialTokens = true,
  ) {}

  /** Add one generated token; returns the text it completes ('' while a character is incomplete). */
  push(id: number): string {
    const bytes = this.tok.tokenBytes(id, this.skipSpecialTokens);
    if (bytes) {
      const delta = this.utf8.decode(bytes, { stream: true });
      this.text += delta;
      return delta;
    }
    this.ids.push(id);
    const prefix = this.tok.decode(this.ids.slice(this.prefixOffset, this.readOffset), this.skipSpecialTokens);
    const full = this.tok.decode(this.ids.slice(this.prefixOffset), this.skipSpecialTokens);
    if (full.length <= prefix.length || full.endsWith('\uFFFD')) return '';
    const delta = full.slice(prefix.length);
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    this.text += delta;
    return delta;
  }

  /** At the end: whatever was held back (an incomplete character at the very end is emitted as U+FFFD). */
  flush(): string {
    const rest = this.utf8.decode();
    if (rest) {
      this.text += rest;
      return rest;
    }
    if (this.readOffset >= this.ids.length) return '';
    const prefix = this.tok.decode(this.ids.slice(this.prefixOffset, this.readOffset), this.skipSpecialTokens);
    const full = this.tok.decode(this.ids.slice(this.prefixOffset), this.skipSpecialTokens);
    this.readOffset = this.ids.length;
    const delta = full.length > prefix.length ? full.slice(prefix.length) : '';
    this.text += delta;
    return delta;
  }
}
