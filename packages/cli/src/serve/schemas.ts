import { z } from 'zod';

/**
 * Request bodies of the OpenAI API, strict: a field this server does not know is a 400 naming it (a silently ignored
 * `logit_bias` or typo'd `max_token` would give answers the client did not ask for). Fields OpenAI defines that this
 * engine does not implement are accepted only at their neutral value.
 */
const stop = z.union([z.string().min(1), z.array(z.string().min(1)).max(16)]).nullish();
const neutral = (v: number) => z.literal(v).nullish();

const sampling = {
  model: z.string().optional(),
  max_tokens: z.number().int().min(1).nullish(),
  // OpenAI's default is 1 (and so is this server's; `generate --temperature` defaults to 0): stated in serve --help
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().min(-1).nullish(),
  n: z.number().int().min(1).max(16).nullish(),
  seed: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullish(),
  stop,
  stop_token_ids: z.array(z.number().int().min(0)).nullish(),
  ignore_eos: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.strictObject({ include_usage: z.boolean().optional(), continuous_usage_stats: z.boolean().optional() }).nullish(),
  user: z.string().optional(),
  presence_penalty: neutral(0),
  frequency_penalty: neutral(0),
  repetition_penalty: neutral(1),
};

export const completionRequest = z.strictObject({
  ...sampling,
  prompt: z.union([
    z.string(),
    z.array(z.string()).min(1),
    z.array(z.number().int().min(0)).min(1),
    z.array(z.array(z.number().int().min(0)).min(1)).min(1),
  ]),
  echo: z.literal(false).nullish(),
  // logprobs need the sampler's log-softmax, which the engine does not return yet: refused with a clear 400
  logprobs: z.number().int().min(0).max(20).nullish(),
  suffix: z.null().optional(),
  best_of: neutral(1),
});
export type CompletionRequest = z.infer<typeof completionRequest>;

const textPart = z.strictObject({ type: z.literal('text'), text: z.string() });
const message = z.object({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
  content: z.union([z.string(), z.array(textPart), z.null()]),
  name: z.string().optional(),
});

export const chatRequest = z.strictObject({
  ...sampling,
  messages: z.array(message).min(1),
  max_completion_tokens: z.number().int().min(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  add_generation_prompt: z.boolean().optional(),
});
export type ChatRequest = z.infer<typeof chatRequest>;

export const embeddingRequest = z.object({ input: z.unknown(), model: z.string().optional() }).loose();
