// Writes a byte-level BPE tokenizer with a 128,000-id vocabulary (Llama-3's size) into a model folder, so the serving
// benchmark detokenises as a real model's server does: ids 0..255 the bytes (GPT-2's byte-to-unicode map), then
// merges of random pairs of earlier tokens (seeded; every token's string is new), ids 128000/128001 the BOS/EOS
// specials of fk_llama3_8b_config, and a ChatML template. Usage: node tokenizer_128k.mjs MODEL_DIR
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
if (!dir) throw new Error('usage: tokenizer_128k.mjs MODEL_DIR');
const bs = [];
for (let b = 33; b <= 126; b++) bs.push(b);
for (let b = 161; b <= 172; b++) bs.push(b);
for (let b = 174; b <= 255; b++) bs.push(b);
const cs = [...bs];
let n = 0;
for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
const byteChar = new Map(bs.map((b, i) => [b, String.fromCodePoint(cs[i])]));
const tokens = [];
for (let b = 0; b < 256; b++) tokens.push(byteChar.get(b));
const seen = new Set(tokens);
const merges = [];
let s = 1;
const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32);
while (tokens.length < 128000) {
  // short tokens mostly (merges of recent-ish tokens keep strings from growing without bound)
  const a = tokens[Math.floor(rnd() * Math.min(tokens.length, 4096))];
  const b = tokens[Math.floor(rnd() * Math.min(tokens.length, 4096))];
  const t = a + b;
  if (seen.has(t) || t.length > 16) continue;
  seen.add(t);
  tokens.push(t);
  merges.push(`${a} ${b}`);
}
const vocab = Object.fromEntries(tokens.map((t, i) => [t, i]));
const specials = [['<|begin_of_text|>', 128000], ['<|end_of_text|>', 128001], ['<|im_start|>', 128002], ['<|im_end|>', 128003]];
const tokenizer = {
  version: '1.0', truncation: null, padding: null,
  added_tokens: specials.map(([content, id]) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
  normalizer: null,
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }], pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }], special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [128000], tokens: ['<|begin_of_text|>'] } } },
  decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
};
writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizer));
writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({
  bos_token: '<|begin_of_text|>', eos_token: '<|end_of_text|>',
  chat_template: "{{ bos_token }}{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
}, null, 2));
console.log(`tokenizer_128k: ${tokens.length} byte-level BPE tokens + ${specials.length} specials -> ${dir}`);
