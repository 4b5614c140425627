import { readFileSync } from 'node:fs';
import { UserError } from '@fastkernels/core';
import { z } from 'zod';
import type { GenerateRequest } from './generate.js';

/** A prompt and where it came from (`FILE line N`), for messages. */
export interface SourcedPrompt extends GenerateRequest {
  readonly where: string;
}

const PromptLine = z.object({
  prompt_ids: z.array(z.number().int().nonnegative()).min(1),
  max_tokens: z.number().int().positive().optional(),
});

const FIX = 'one JSON object per line: {"prompt_ids": [1, 2, 3], "max_tokens": 16}';

/** Parse JSONL prompts: one {"prompt_ids": [...], "max_tokens"?: N} per line, blank lines skipped. */
export function parsePromptJsonl(text: string, file: string): SourcedPrompt[] {
  const out: SourcedPrompt[] = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    const where = `${file} line ${i + 1}`;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (e) {
      throw new UserError(`${where}: not valid JSON (${(e as Error).message})`, { field: '--prompt-file', fix: FIX });
    }
    const p = PromptLine.safeParse(raw);
    if (!p.success) {
      const issue = p.error.issues[0]!;
      throw new UserError(`${where}: ${issue.path.join('.') || 'line'}: ${issue.message}`, { field: '--prompt-file', fix: FIX });
    }
    out.push({ promptIds: p.data.prompt_ids, ...(p.data.max_tokens ? { maxTokens: p.data.max_tokens } : {}), where });
  });
  if (!out.length) throw new UserError(`${file} holds no prompts`, { field: '--prompt-file', fix: FIX });
  return out;
}

export function readPromptFile(file: string): SourcedPrompt[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new UserError(`cannot read ${file}: ${(e as Error).message}`, { field: '--prompt-file' });
  }
  return parsePromptJsonl(text, file);
}

/** Check every prompt id against the vocabulary, naming the prompt's source and the token. */
export function checkPromptVocabulary(prompts: readonly SourcedPrompt[], vocabSize: number, configFile: string): void {
  for (const p of prompts) {
    p.promptIds.forEach((id, j) => {
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
        throw new UserError(`${p.where}: token ${j}: id ${id} is outside the vocabulary [0, ${vocabSize}) of ${configFile}`, { field: 'prompt_ids' });
      }
    });
  }
}
