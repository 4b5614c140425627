/**
 * The causal-LM forward `fastkernels profile` runs: one step of the paged engine (LLMEngine: schedule, the model's
 * forward in its attention context, the LM head on each sequence's last token, sampling, the tokens read back).
 *
 * - prefill: one sequence of `tokens` seeded prompt ids prefilled in one step (its one sampled token ends it, freeing
 *   its KV blocks for the next);
 * - decode: `batch` sequences with `tokens`-token prompts prefilled first (not timed), then each step decodes all of
 *   them at once (their context grows by one a step).
 *
 * The engines run without overlap or chained decode, so a step's time is its own. A decode engine with graphs replays
 * its captured decode graph; prefills always run eagerly.
 */
import { Rng, UserError, type Backend, type DType, type ModuleRegistry } from '@fastkernels/core';
import { Checkpoint, LLMEngine, loadModel, type LoadedModel } from '@fastkernels/model-zoo';
import type { LoadedWorkload } from './workloads.js';

export type LlmPhase = 'prefill' | 'decode';

export interface LlmSpec {
  readonly dir: string;
  readonly backend: Backend;
  readonly dtype?: DType;
  readonly phase: LlmPhase;
  /** The prefill's prompt tokens; in decode, each sequence's prompt (its context before the timed steps). */
  readonly tokens: number;
  /** Decode: sequences per step. */
  readonly batch: number;
  /** Timed and warm-up steps one engine runs at most (decode: every sequence generates this many tokens and more). */
  readonly steps: number;
  readonly seed: number;
}

const KV_BLOCK = 16;

/** One engine over the loaded model, set up for the phase: `step` runs one checked step of it. */
function engineFor(loaded: LoadedModel, spec: LlmSpec, graphs: boolean): { step: () => void; dispose: () => void } {
  const { geometry } = loaded;
  const seqs = spec.phase === 'decode' ? spec.batch : 1;
  // decode: a sequence prefilled early decodes while the later ones prefill (mixed steps), so it needs tokens for those too
  const maxTokens = spec.steps + (spec.phase === 'decode' ? spec.batch : 0) + 4;
  const maxModelLen = spec.tokens + maxTokens + 1;
  if (maxModelLen > geometry.maxPositionEmbeddings) {
    throw new UserError(`${spec.tokens} tokens and ${maxTokens} generated exceed the model's ${geometry.maxPositionEmbeddings} positions (max_position_embeddings)`, { field: '--tokens', fix: `pass --tokens ${Math.max(1, geometry.maxPositionEmbeddings - maxTokens - 1)} or less` });
  }
  const rng = new Rng(spec.seed);
  const prompt = () => Array.from({ length: spec.tokens }, () => rng.int(0, geometry.vocabSize));
  const numKvBlocks = seqs * Math.ceil(maxModelLen / KV_BLOCK) + 2;
  const engine = new LLMEngine(loaded.model, loaded.ctx, geometry, {
    maxNumSeqs: seqs, maxNumBatchedTokens: Math.max(spec.tokens, Math.min(seqs * spec.tokens, 16384)), maxModelLen, numKvBlocks, graphs, overlap: false, chainDecode: false, eosTokenId: -1,
  });
  try {
    if (spec.phase === 'prefill') {
      return {
        step: () => {
          engine.addRequest(prompt(), { maxTokens: 1, ignoreEos: true });
          const { record } = engine.step();
          if (record.kind !== 'prefill' || record.numTokens !== spec.tokens) throw new Error(`profile: expected a prefill of ${spec.tokens} tokens, the engine ran a ${record.kind} of ${record.numTokens}`);
        },
        dispose: () => engine.dispose(),
      };
    }
    for (let i = 0; i < spec.batch; i++) engine.addRequest(prompt(), { maxTokens, ignoreEos: true });
    // prefill every sequence (one or more steps, not timed) until a step decodes them all
    for (let i = 0; ; i++) {
      const { record } = engine.step();
      if (record.kind === 'decode' && record.numSeqs === spec.batch) break;
      if (i > spec.batch + 4) throw new Error(`profile: the engine did not reach a decode step of ${spec.batch} sequences`);
    }
    return {
      step: () => {
        const { record } = engine.step();
        if (record.kind !== 'decode' || record.numSeqs !== spec.batch) throw new Error(`profile: expected a decode step of ${spec.batch} sequences, the engine ran a ${record.kind} of ${record.numSeqs}`);
      },
      dispose: () => engine.dispose(),
    };
  } catch (e) {
    engine.dispose();
    throw e;
  }
}

export function loadLlmWorkload(spec: LlmSpec, registry: ModuleRegistry, withGraphs: boolean): LoadedWorkload {
  // a config-only folder on CUDA draws its weights on the device (seconds for an 8B), as e2e and serve do
  const randomInit = spec.backend.name === 'cuda' && !Checkpoint.exists(spec.dir) ? { randomInit: 'device' as const } : {};
  const loaded = loadModel(spec.dir, { backend: spec.backend, registry, initSeed: spec.seed, ...randomInit, ...(spec.dtype ? { dtype: spec.dtype } : {}) });
  const engines: { dispose: () => void }[] = [];
  try {
    const eager = engineFor(loaded, spec, false);
    engines.push(eager);
    let graphs: (() => void) | string = 'graphs were not asked for';
    if (spec.phase === 'prefill') graphs = 'the engine runs prefills eagerly (it captures decode steps only)';
    else if (withGraphs && !spec.backend.capabilities.graphs) graphs = `the ${spec.backend.name} backend has no CUDA graphs`;
    else if (withGraphs) {
      const g = engineFor(loaded, spec, true);
      engines.push(g);
      graphs = g.step;
    }
    const B = spec.batch;
    return {
      architecture: loaded.architecture.name,
      dtype: loaded.ctx.dtype,
      weights: loaded.weights,
      tokens: spec.phase === 'prefill' ? spec.tokens : B,
      description: spec.phase === 'prefill'
        ? `one engine step prefilling 1 sequence of ${spec.tokens} tokens (forward, LM head on the last token, sampling)`
        : `one engine decode step of ${B} sequence${B === 1 ? '' : 's'} at a context of ${spec.tokens}+ tokens (forward, LM head, sampling; no overlap or chaining)`,
      eager: eager.step,
      graphs,
      dispose: () => {
        for (const e of engines) e.dispose();
        loaded.model.dispose();
      },
    };
  } catch (e) {
    for (const en of engines) en.dispose();
    loaded.model.dispose();
    throw e;
  }
}
