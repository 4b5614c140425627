import { readFileSync } from 'node:fs';
import { UserError } from '@fastkernels/core';
import { z } from 'zod';

/** One benchmark request: a prompt (token ids or text) and the tokens to generate. */
export interface BenchRequest {
  readonly prompt: number[] | string;
  readonly promptLen: number;
  readonly outputLen: number;
}

/** mulberry32: a small seeded generator, so a workload is the same on every run and machine. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const uniformInt = (rnd: () => number, lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));

/**
 * vLLM's random dataset: input and output lengths uniform in [min, max] (in/out U[100, 1024] is nano-vllm's workload),
 * prompts of random token ids below `idRange` (sent as ids, so no tokenizer is needed on either side).
 */
export function randomWorkload(o: { num: number; inMin: number; inMax: number; outMin: number; outMax: number; idRange: number; seed: number }): BenchRequest[] {
  const rnd = seededRandom(o.seed);
  return Array.from({ length: o.num }, () => {
    const promptLen = uniformInt(rnd, o.inMin, o.inMax);
    const outputLen = uniformInt(rnd, o.outMin, o.outMax);
    const prompt = Array.from({ length: promptLen }, () => uniformInt(rnd, 1, o.idRange - 1));
    return { prompt, promptLen, outputLen };
  });
}

const shareGpt = z.array(
  z.object({ conversations: z.array(z.object({ from: z.string(), value: z.string() }).loose()) }).loose(),
);

/**
 * A ShareGPT-format file (ShareGPT_V3_unfiltered_cleaned_split.json): each conversation's first turn is the prompt
 * (text); the output length is the reply's length in tokens, or `outputLen` when given. Token counts come from
 * `countTokens` (the model's tokenizer: then vLLM's filters apply, prompts and replies of at least 4 tokens, prompts up
 * to 1024 and prompt + reply up to 2048), else are estimated at 4 characters a token. Conversations with fewer than two
 * turns are skipped; `num` are taken in a seeded shuffle.
 */
export function shareGptWorkload(file: string, o: { num: number; outputLen?: number; seed: number; countTokens?: (text: string) => number }): BenchRequest[] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UserError(`cannot read ${file}: ${(e as Error).message}`, { field: '--dataset-path' });
  }
  const parsed = shareGpt.safeParse(raw);
  if (!parsed.success) throw new UserError(`${file} is not ShareGPT format ([{"conversations": [{"from", "value"}, ...]}]): ${parsed.error.issues[0]?.message}`, { field: '--dataset-path' });
  const convs = parsed.data.filter((c) => c.conversations.length >= 2);
  const rnd = seededRandom(o.seed);
  for (let i = convs.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [convs[i], convs[j]] = [convs[j]!, convs[i]!];
  }
  const count = o.countTokens ?? ((t: string) => Math.ceil(t.length / 4));
  const out: BenchRequest[] = [];
  for (const c of convs) {
    if (out.length === o.num) break;
    const prompt = c.conversations[0]!.value;
    const promptLen = count(prompt);
    const replyLen = count(c.conversations[1]!.value);
    if (o.countTokens && (promptLen < 4 || replyLen < 4 || promptLen > 1024 || promptLen + replyLen > 2048)) continue;
    out.push({ prompt, promptLen, outputLen: o.outputLen ?? Math.max(4, replyLen) });
  }
  if (out.length < o.num) throw new UserError(`${file} has ${out.length} usable conversations, fewer than --num-prompts ${o.num}`, { field: '--num-prompts' });
  return out;
}

const idsLine = z.union([z.array(z.number().int().nonnegative()).min(1), z.object({ input_ids: z.array(z.number().int().nonnegative()).min(1) }).loose()]);

/**
 * A token-id file, one document a line: a JSON array of ids or {"input_ids": [...]} (the embed suite's workload, what
 * `embed --input` reads). The first `num` lines in file order, each sent as ids; `outputLen` for /v1/completions.
 */
export function tokenIdsWorkload(file: string, o: { num: number; outputLen: number }): BenchRequest[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new UserError(`cannot read ${file}: ${(e as Error).message}`, { field: '--dataset-path' });
  }
  const out: BenchRequest[] = [];
  for (const [i, line] of text.split('\n').entries()) {
    if (out.length === o.num) break;
    if (!line.trim()) continue;
    let parsed;
    try {
      parsed = idsLine.safeParse(JSON.parse(line));
    } catch (e) {
      throw new UserError(`${file}:${i + 1} is not JSON: ${(e as Error).message}`, { field: '--dataset-path' });
    }
    if (!parsed.success) throw new UserError(`${file}:${i + 1}: expected a JSON array of token ids or {"input_ids": [...]}`, { field: '--dataset-path' });
    const ids = Array.isArray(parsed.data) ? parsed.data : parsed.data.input_ids;
    out.push({ prompt: ids, promptLen: ids.length, outputLen: o.outputLen });
  }
  if (out.length < o.num) throw new UserError(`${file} has ${out.length} documents, fewer than --num-prompts ${o.num}`, { field: '--num-prompts' });
  return out;
}

/**
 * Arrival offsets (ms from the start) of `n` requests: a Poisson process at `rate` requests/s (exponential gaps, seeded),
 * or all at time 0 for rate Infinity (then only --max-concurrency paces them).
 */
export function arrivals(n: number, rate: number, seed: number): number[] {
  if (!Number.isFinite(rate)) return new Array<number>(n).fill(0);
  const rnd = seededRandom(seed ^ 0x5eed);
  let t = 0;
  return Array.from({ length: n }, () => {
    const at = t;
    t += (-Math.log(1 - rnd()) / rate) * 1000;
    return at;
  });
}
