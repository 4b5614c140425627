import { readFileSync } from 'node:fs';
import { Rng, UserError } from '@fastkernels/core';
import { z } from 'zod';

/** One request of a workload: prompt token ids and how many tokens to generate (EOS ignored). */
export interface WorkloadRequest {
  readonly promptIds: readonly number[];
  readonly outputLen: number;
}

export interface Workload {
  /** For records: `synthetic-256x[100,1024]x[100,1024]-seed0` or the file name. */
  readonly name: string;
  readonly requests: readonly WorkloadRequest[];
}

export interface SyntheticWorkloadSpec {
  readonly numRequests: number;
  readonly inputLen: readonly [number, number];
  readonly outputLen: readonly [number, number];
  readonly seed: number;
  readonly vocabSize: number;
}

/** nano-vllm's bench.py shape: 256 requests, input and output lengths uniform in [100, 1024], random token ids. */
export const NANO_VLLM_WORKLOAD: Omit<SyntheticWorkloadSpec, 'vocabSize'> = { numRequests: 256, inputLen: [100, 1024], outputLen: [100, 1024], seed: 0 };

/**
 * A seeded synthetic workload (core's Rng, so the same spec gives the same requests on every machine). It has
 * nano-vllm's distribution, not its exact draws (those come from Python's Mersenne Twister).
 */
export function syntheticWorkload(spec: SyntheticWorkloadSpec): Workload {
  const rng = new Rng(spec.seed);
  const [i0, i1] = spec.inputLen;
  const [o0, o1] = spec.outputLen;
  const requests = Array.from({ length: spec.numRequests }, () => {
    const n = rng.int(i0, i1 + 1);
    const promptIds = Array.from({ length: n }, () => rng.int(0, spec.vocabSize));
    return { promptIds, outputLen: rng.int(o0, o1 + 1) };
  });
  return { name: `synthetic-${spec.numRequests}x[${i0},${i1}]x[${o0},${o1}]-seed${spec.seed}`, requests };
}

const Line = z.object({
  prompt_ids: z.array(z.number().int().nonnegative()).min(1),
  output_len: z.number().int().positive().optional(),
  max_tokens: z.number().int().positive().optional(),
});
const FIX = 'one JSON object per line: {"prompt_ids": [1, 2, 3], "output_len": 128}';

/** JSONL workload: {"prompt_ids": [...], "output_len": N} per line ("max_tokens" is accepted too); blank lines skipped. */
export function parseWorkloadJsonl(text: string, file: string): Workload {
  const requests: WorkloadRequest[] = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    const where = `line ${i + 1}`;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (e) {
      throw new UserError(`${where}: not valid JSON (${(e as Error).message})`, { file, field: '--workload', fix: FIX });
    }
    const p = Line.safeParse(raw);
    if (!p.success) {
      const issue = p.error.issues[0]!;
      throw new UserError(`${where}: ${issue.path.join('.') || 'line'}: ${issue.message}`, { file, field: '--workload', fix: FIX });
    }
    const out = p.data.output_len ?? p.data.max_tokens;
    if (out === undefined) throw new UserError(`${where}: no output_len`, { file, field: '--workload', fix: FIX });
    requests.push({ promptIds: p.data.prompt_ids, outputLen: out });
  });
  if (!requests.length) throw new UserError('holds no requests', { file, field: '--workload', fix: FIX });
  return { name: file.split('/').pop()!, requests };
}

export function readWorkloadFile(file: string): Workload {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new UserError(`cannot read the workload (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`, { file, field: '--workload' });
  }
  return parseWorkloadJsonl(text, file);
}

/**
 * A workload from a flag: a JSONL file, or `synthetic[:N[:IN_LO-IN_HI[:OUT_LO-OUT_HI[:SEED]]]]`
 * (defaults 256, 100-1024, 100-1024, 0).
 */
export function resolveWorkload(spec: string, vocabSize: number): Workload {
  if (!spec.startsWith('synthetic')) return readWorkloadFile(spec);
  const parts = spec.split(':').slice(1);
  const bad = () => new UserError(`cannot parse '${spec}'`, { field: '--workload', fix: 'synthetic:256:100-1024:100-1024:0 (requests, input range, output range, seed), or a JSONL file' });
  const range = (s: string | undefined, d: readonly [number, number]): [number, number] => {
    if (s === undefined) return [d[0], d[1]];
    const m = /^(\d+)-(\d+)$/.exec(s);
    if (!m || Number(m[1]) < 1 || Number(m[2]) < Number(m[1])) throw bad();
    return [Number(m[1]), Number(m[2])];
  };
  const n = parts[0] === undefined ? NANO_VLLM_WORKLOAD.numRequests : Number(parts[0]);
  const seed = parts[3] === undefined ? 0 : Number(parts[3]);
  if (!Number.isInteger(n) || n < 1 || !Number.isInteger(seed) || seed < 0 || parts.length > 4) throw bad();
  return syntheticWorkload({ numRequests: n, inputLen: range(parts[1], NANO_VLLM_WORKLOAD.inputLen), outputLen: range(parts[2], NANO_VLLM_WORKLOAD.outputLen), seed, vocabSize });
}

/** Check a workload against the model: ids in the vocabulary, prompt + output within max-model-len. */
export function checkWorkload(w: Workload, vocabSize: number, maxModelLen: number, file = w.name): void {
  w.requests.forEach((r, i) => {
    for (const id of r.promptIds) if (id >= vocabSize) throw new UserError(`request ${i}: token id ${id} is outside the vocabulary [0, ${vocabSize})`, { file, field: '--workload' });
    if (r.promptIds.length + r.outputLen > maxModelLen) {
      throw new UserError(`request ${i}: ${r.promptIds.length} prompt + ${r.outputLen} output tokens exceed max-model-len ${maxModelLen}`, { file, field: '--workload', fix: 'raise --max-model-len or shorten the requests' });
    }
  });
}
