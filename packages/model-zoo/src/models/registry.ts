/**
 * The model registry: an HF config.json (its `architectures`, else its `model_type`) -> the architecture that reads it:
 * a zod config schema, the module tree builder, the weight rules (renames, stacking, sharding), the geometry the
 * engine sizes itself by, and the kind of runner that serves it. Commands resolve a model folder through this alone,
 * so a new architecture is a folder in model-zoo that registers one entry, with nothing else edited.
 */
import { readFileSync } from 'node:fs';
import { UserError, type DType, type ExecutionContext } from '@fastkernels/core';
import { z } from 'zod';
import type { EngineGeometry } from '../engine/engine.js';
import type { CausalLM } from '../engine/model-runner.js';
import type { EncoderModel } from '../engine/encoder-runner.js';
import type { VisionModel } from '../engine/vision-model.js';
import type { PipelineModel } from '../engine/pipeline-model.js';
import type { WeightRules } from '../weights/weight-plan.js';

/**
 * The production path a model runs on (growth.md §3): decoder LLMs (the engine: attention layers, recurrent layers or
 * both, as geometry.layerCaches says) and encoders (EncoderRunner) today.
 */
export type RunnerKind = 'decoder-llm' | 'encoder' | 'pipeline' | 'vision';

/** What the engine sizes itself by (KV cache, graph pool, prompt checks): the model's answer, not a Llama config. */
export type DecoderGeometry = EngineGeometry;

/** One architecture (a family may register several). C is the family's parsed config. */
export interface ModelArchitecture<C = unknown> {
  /** Short name, in logs and errors ("llama"). */
  readonly name: string;
  /** The family folder it belongs to (MacroEval groups by it). */
  readonly family: string;
  /** HF `architectures` entries it reads (LlamaForCausalLM). */
  readonly architectures: readonly string[];
  /** HF `model_type` values it reads, for configs without `architectures`. */
  readonly modelTypes: readonly string[];
  readonly runner: RunnerKind;
  /** zod over the config.json fields the family reads; a UserError naming `file` and the field otherwise. */
  parseConfig(raw: unknown, file: string): C;
  /** The dtype the config names (torch_dtype / dtype), if any. */
  dtype(config: C): DType | null;
  geometry(config: C): DecoderGeometry;
  /**
   * Build the module tree in `ctx` (through ctx.registry, so candidate overrides apply); this rank's shard under TP.
   * A CausalLM for runner 'decoder-llm', an EncoderModel for 'encoder', a VisionModel for 'vision', a PipelineModel for
   * 'pipeline' (engine/pipeline-model.ts; loadPipelineModel reads its folder).
   */
  build(ctx: ExecutionContext, config: C): CausalLM | EncoderModel | VisionModel | PipelineModel;
  /** How the tree's parameter names map onto checkpoint tensors. */
  weightRules(config: C): WeightRules;
  /** The config splits over `world` tensor-parallel ranks; a UserError naming the field of `file` otherwise. */
  checkTensorParallel?(config: C, world: number, file: string): void;
  /** One line for logs ("qwen2, 2 layers, hidden 64"). */
  describe?(config: C): string;
}

// Entries hold their own config type; the registry hands them out as unknown-config entries.
type AnyArchitecture = ModelArchitecture<any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const HeadSchema = z.looseObject({
  architectures: z.array(z.string()).nullish(),
  model_type: z.string().nullish(),
});

export class ModelRegistry {
  private readonly entries: AnyArchitecture[] = [];

  constructor(entries: readonly AnyArchitecture[] = []) {
    for (const e of entries) this.register(e);
  }

  /** Add an architecture; an `architectures` name or model_type already taken is a programming error. */
  register<C>(entry: ModelArchitecture<C>): this {
    for (const e of this.entries) {
      const arch = entry.architectures.find((a) => e.architectures.includes(a));
      const mt = entry.modelTypes.find((t) => e.modelTypes.includes(t));
      if (arch || mt) throw new Error(`model registry: ${entry.name} claims ${arch ? `architecture ${arch}` : `model_type ${mt}`}, which ${e.name} has`);
    }
    this.entries.push(entry);
    return this;
  }

  /** A registry with these entries and the ones added to it later (tests, plugins). */
  child(): ModelRegistry {
    return new ModelRegistry(this.entries);
  }

  list(): readonly ModelArchitecture<unknown>[] {
    return this.entries;
  }

  /** The architecture of a raw config: the first of its `architectures` registered, else its model_type. */
  resolve(raw: unknown, file = 'config.json'): ModelArchitecture<unknown> {
    const head = HeadSchema.safeParse(raw);
    if (!head.success) {
      const issue = head.error.issues[0]!;
      const field = issue.path.join('.') || '(root)';
      throw new UserError(`invalid field ${field} in ${file}: ${issue.message}`, { field });
    }
    const { architectures, model_type: modelType } = head.data;
    for (const a of architectures ?? []) {
      const e = this.entries.find((x) => x.architectures.includes(a));
      if (e) return e;
    }
    const byType = modelType ? this.entries.find((x) => x.modelTypes.includes(modelType)) : undefined;
    if (byType) return byType;
    const said = [architectures?.length ? `architectures [${architectures.join(', ')}]` : '', modelType ? `model_type '${modelType}'` : ''].filter(Boolean).join(' and ') || 'neither architectures nor model_type';
    throw new UserError(`no registered model reads ${said} in ${file}`, {
      field: architectures?.length ? 'architectures' : 'model_type',
      fix: `registered: ${this.entries.map((e) => `${e.name} (${[...e.architectures, ...e.modelTypes.map((t) => `model_type ${t}`)].join(', ')})`).join('; ')}`,
    });
  }
}

/** A config.json read and resolved. */
export interface ResolvedConfig<C = unknown> {
  readonly architecture: ModelArchitecture<C>;
  readonly config: C;
  /** The config's model_type, else the architecture's name (what logs and reports call the model). */
  readonly modelType: string;
  /** The file's JSON as is (written back by init-weights). */
  readonly raw: Record<string, unknown>;
  readonly geometry: DecoderGeometry;
  readonly file: string;
}

/** Read a config.json, find its architecture in `models` and parse it with the architecture's schema. */
export function resolveConfigFile(file: string, models: ModelRegistry): ResolvedConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new UserError(`cannot read ${file}: ${(e as Error).message}`, { fix: 'pass a model folder holding config.json' });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new UserError(`${file} is not valid JSON: ${(e as Error).message}`);
  }
  const architecture = models.resolve(raw, file);
  const config = architecture.parseConfig(raw, file);
  const modelType = (raw as { model_type?: unknown }).model_type;
  return { architecture, config, modelType: typeof modelType === 'string' ? modelType : architecture.name, raw: raw as Record<string, unknown>, geometry: architecture.geometry(config), file };
}
