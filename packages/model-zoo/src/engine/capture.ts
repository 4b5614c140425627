import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CAPTURE_VERSION, Tensor, type CaptureIndex, type DType, type ModuleRegistry, type TaskDefinition } from '@fastkernels/core';
import { writeSafetensors } from '../weights/safetensors.js';
import { getForwardContext, hasForwardContext } from './forward-context.js';
import { instrumentRegistry } from './instrument.js';
import { LLMEngine } from './engine.js';

/**
 * `fastkernels capture` (design §4 "Cases"): every module built from the instrumented registry records, per
 * task, its init argument lists (deduplicated) and every forward call's dims (the task's symbolic input shapes
 * resolved from the actual tensors), activation dtype and case options, with call counts; integer inputs (token
 * ids, positions, slot mappings, block tables, seq lens, cu_seqlens, routing ids…) keep the values of each
 * shape's first call in `values.safetensors` next to the index. The index is core's CaptureIndexSchema
 * (harness/captures.ts), the format `fastkernels bench --captures` reads.
 *
 * Run the engine eagerly while capturing (graphs off): replays do not call forward, so only eager steps are seen;
 * decode shapes are then the real batch sizes, not the padded graph buckets.
 */
export class CaptureRecorder {
  readonly registry: ModuleRegistry;
  private readonly tasks = new Map<string, {
    init: unknown[][];
    initKeys: Map<string, number>;
    forward: Map<string, { dims: Record<string, number>; dtype: DType; count: number; init: number; options?: Record<string, unknown>; values?: Record<string, { file: string; tensor: string }> }>;
  }>();
  private readonly initOf = new WeakMap<object, number>();
  /** While true, forwards are not recorded (engine start-up: the memory profile and warm-up runs). */
  paused = false;
  private readonly values: { name: string; dtype: DType; shape: number[]; bytes: Uint8Array }[] = [];

  constructor(
    base: ModuleRegistry,
    private readonly options: { valuesFile?: string; recordValues?: boolean; maxValueBytes?: number } = {},
  ) {
    this.registry = instrumentRegistry(base, {
      onInit: (id, args, m) => {
        const t = this.entry(id);
        const key = safeJson(args);
        let idx = t.initKeys.get(key);
        if (idx === undefined) {
          idx = t.init.length;
          t.init.push(JSON.parse(key) as unknown[]);
          t.initKeys.set(key, idx);
        }
        this.initOf.set(m, idx);
      },
      onForward: (id, m, args, run) => {
        // record before running: in-place ops change their inputs
        if (!this.paused) this.record(base.task(id)!, m, args);
        return run();
      },
    }, 'capture');
  }

  private entry(id: string) {
    let t = this.tasks.get(id);
    if (!t) this.tasks.set(id, (t = { init: [], initKeys: new Map(), forward: new Map() }));
    return t;
  }

  private record(task: TaskDefinition, m: object, args: readonly unknown[]): void {
    const dims: Record<string, number> = {};
    let dtype: DType | null = null;
    let firstFloat: DType | null = null;
    task.inputs.forEach((spec, i) => {
      const a = args[i];
      if (!(a instanceof Tensor)) return;
      // the first input to name a dim sets it (a state pool [slots, H, K, V] passed as initial_state does not rename B)
      // an input of another rank than the spec's, as the caller's torch code passes it: extra leading dims fold into
      // the first (a linear / norm on [B, S, K] is T = B x S rows), missing trailing dims are 1 (a group norm on [N, C, L])
      const extra = Math.max(0, a.rank - spec.shape.length);
      const sizeAt = (j: number) => (j >= a.rank - extra ? 1 : j === 0 ? a.shape.slice(0, extra + 1).reduce((x, y) => x * y, 1) : a.shape[j + extra]!);
      spec.shape.forEach((d, j) => {
        if (typeof d === 'string' && !(d in dims)) dims[d] = sizeAt(j);
      });
      if (spec.dtype === 'act' && !dtype) dtype = a.dtype;
      if (!firstFloat && isFloat(a.dtype)) firstFloat = a.dtype;
    });
    const dt: DType = dtype ?? firstFloat ?? weightDtype(m) ?? 'f32';
    const options = caseOptions(task.id, args);
    const init = this.initOf.get(m) ?? 0;
    const t = this.entry(task.id);
    const key = safeJson([init, Object.entries(dims).sort(), dt, options ?? {}]);
    const prev = t.forward.get(key);
    if (prev) {
      prev.count++;
      return;
    }
    const entry: { dims: Record<string, number>; dtype: DType; count: number; init: number; options?: Record<string, unknown>; values?: Record<string, { file: string; tensor: string }> } = { dims, dtype: dt, count: 1, init };
    if (options) entry.options = options;
    if (this.options.recordValues !== false) {
      const values: Record<string, { file: string; tensor: string }> = {};
      const file = this.options.valuesFile ?? 'values.safetensors';
      const cap = this.options.maxValueBytes ?? 64 << 20;
      task.inputs.forEach((spec, i) => {
        const a = args[i];
        if (!(a instanceof Tensor) || (spec.dtype !== 'i32' && spec.dtype !== 'i64')) return;
        if (a.numel * a.itemsize > cap) return;
        const name = `${task.id}.${t.forward.size}.${spec.name}`;
        this.values.push({ name, dtype: a.dtype, shape: [...a.shape], bytes: a.toHostBytes() });
        values[spec.name] = { file, tensor: name };
      });
      if (Object.keys(values).length) entry.values = values;
    }
    t.forward.set(key, entry);
  }

  /** The index (CaptureIndexSchema). */
  index(model: string, workload: string): CaptureIndex {
    const tasks: CaptureIndex['tasks'] = {};
    for (const [id, t] of [...this.tasks].sort(([a], [b]) => a.localeCompare(b))) {
      if (!t.forward.size) continue;
      tasks[id] = { init: t.init.length ? t.init : [[]], forward: [...t.forward.values()] };
    }
    return { version: CAPTURE_VERSION, model, workload, capturedAt: new Date().toISOString(), tasks };
  }

  /** Write `index.json` (and `values.safetensors`) into dir; returns the index path. */
  write(dir: string, model: string, workload: string): string {
    mkdirSync(dir, { recursive: true });
    const index = this.index(model, workload);
    if (this.values.length) {
      writeSafetensors(join(dir, this.options.valuesFile ?? 'values.safetensors'), this.values.map((v) => ({ name: v.name, dtype: v.dtype, shape: v.shape, bytes: () => v.bytes })), { format: 'pt', model, workload });
    }
    const path = join(dir, 'index.json');
    writeFileSync(path, JSON.stringify(index, null, 1) + '\n');
    return path;
  }
}

function safeJson(x: unknown): string {
  return JSON.stringify(x, (_k, v) => (typeof v === 'bigint' ? Number(v) : v instanceof Tensor ? `<tensor ${v.shape.join('x')}>` : v));
}

function ints(t: unknown): number[] | null {
  return t instanceof Tensor ? [...t.toFloat64Array()] : null;
}

/** Options the task's input builder reads (see each task's makeInputs), from the forward's arguments. */
/** A varlen attention call's sequence lengths from its cu_seqlens (and whether sinks came): the varlen tasks' options. */
function varlenOptions(cuQ: unknown, cuK: unknown, sinks: unknown): Record<string, unknown> | undefined {
  const q = ints(cuQ);
  const k = ints(cuK);
  if (!q || !k) return undefined;
  const lens = (cu: number[]) => cu.slice(1).map((v, i) => v - cu[i]!);
  return { qLens: lens(q), kLens: lens(k), ...(sinks instanceof Tensor ? { sinks: true } : {}) };
}

function caseOptions(taskId: string, args: readonly unknown[]): Record<string, unknown> | undefined {
  switch (taskId) {
    case 'L1/gemma_rms_norm':
    case 'L1/rms_norm':
      return { residual: args[1] instanceof Tensor };
    case 'L1/rotary_emb':
      return args[2] instanceof Tensor ? {} : { key: false };
    case 'L1/store_kvcache': {
      const slots = ints(args[4]);
      return slots ? { pad: slots.filter((s) => s < 0).length } : undefined;
    }
    case 'L1/varlen_prefill_attention':
    case 'L1/flash_attn_prefill':
      return varlenOptions(args[3], args[4], args[5]);
    // FlashInfer's context attention: (query, kv_cache, block_tables, seq_lens, cum_seq_lens_q, cum_seq_lens_kv, sinks)
    case 'L1/flashinfer_prefill':
      return varlenOptions(args[4], args[5], args[6]);
    case 'L1/store_kvcache_hnd': {
      const slots = ints(args[4]);
      return slots ? { pad: slots.filter((s) => s < 0).length } : undefined;
    }
    // gpt-oss's attention sinks (the kernels' optional input after the tensors they always take)
    case 'L1/paged_decode_attention':
      return args[5] instanceof Tensor ? { sinks: true } : undefined;
    case 'L1/flash_attn_decode':
      return args[6] instanceof Tensor ? { sinks: true } : undefined;
    case 'L1/flashinfer_decode':
      return args[4] instanceof Tensor ? { sinks: true } : undefined;
    // the recurrent tasks: whether a state comes in (an argument, or on the engine the layer's state pool)
    case 'L1/chunk_gla':
    case 'L1/fused_recurrent_gla':
    case 'L1/gla_recurrence':
      return { initial_state: args[4] instanceof Tensor };
    case 'L2/gla_attention':
    case 'L3/gla_decoder':
      return { initial_state: args[1] instanceof Tensor || (hasForwardContext() && getForwardContext().stateCaches !== undefined) };
    // Qwen3-Next's gated DeltaNet: the delta rule (state after q, k, v, g, beta), the short conv (after x, weight)
    case 'L1/chunk_gated_delta_rule':
    case 'L1/fused_recurrent_gated_delta_rule':
      return { initial_state: args[5] instanceof Tensor };
    case 'L1/causal_conv1d':
      return args[2] instanceof Tensor ? { initial_states: true } : {};
    case 'L2/qwen3_next_gdn_attention':
      return { initial_state: args[1] instanceof Tensor || (hasForwardContext() && getForwardContext().stateCaches !== undefined) };
    // Kimi-Linear's KDA: the delta rule as Qwen3-Next's (state after q, k, v, g, beta); the layer's states after x
    case 'L1/chunk_kda':
    case 'L1/fused_recurrent_kda':
      return { initial_state: args[5] instanceof Tensor };
    case 'L2/kimi_delta_attention':
      return { initial_state: args.slice(1, 5).some((a) => a instanceof Tensor) || (hasForwardContext() && getForwardContext().stateCaches !== undefined) };
    case 'L4/t5_encoder': {
      // the task's cases name each row's valid length; FLUX passes no mask (every token valid)
      const ids = args[0] instanceof Tensor ? args[0] : null;
      if (!ids) return undefined;
      const [B, S] = ids.shape as [number, number];
      const mask = ints(args[1]);
      return { lens: Array.from({ length: B }, (_, b) => (mask ? mask.slice(b * S, (b + 1) * S).reduce((a, v) => a + v, 0) : S)) };
    }
    case 'L1/flux_pos_embed': {
      // the ids are txt zero rows then (0, row, col) for an h x w grid (whose first row is zeros too): h, w from the maxima
      const ids = args[0] instanceof Tensor ? args[0].toFloat64Array() : null;
      if (!ids) return undefined;
      let h = 0;
      let w = 0;
      for (let i = 0; i < ids.length; i += 3) {
        h = Math.max(h, ids[i + 1]! + 1);
        w = Math.max(w, ids[i + 2]! + 1);
      }
      return { txt: ids.length / 3 - h * w, h, w };
    }
    case 'L1/sampler': {
      const temp = ints(args[1]);
      return temp ? { mode: temp.every((t) => t === 0) ? 'greedy' : 'mixed' } : undefined;
    }
    case 'L2/attention':
    case 'L2/attention_impl':
    case 'L3/llama_decoder':
    case 'L3/mixtral_decoder':
    case 'L3/qwen3_moe_decoder':
    case 'L4/llama':
    case 'L4/mixtral':
    case 'L4/qwen3_moe':
    case 'L3/gpt_oss_decoder':
    case 'L4/gpt_oss':
    case 'L2/qwen3_next_attention':
    case 'L3/qwen3_next_decoder':
    case 'L4/qwen3_next':
    case 'L2/kimi_mla_attention':
    case 'L3/kimi_linear_decoder':
    case 'L4/kimi_linear': {
      if (!hasForwardContext()) return undefined;
      const md = getForwardContext().attnMetadata;
      const cu = md.cuSeqlensQ ? ints(md.cuSeqlensQ)! : [0];
      const lens = md.seqLens ? ints(md.seqLens)! : [];
      // prefill chunks are recorded as prompts from position 0 (the task's step builder has no cached prefix)
      const opts: Record<string, unknown> = { prefillLens: cu.slice(1).map((v, i) => v - cu[i]!), decodeCtxLens: lens.map((n) => Math.max(1, n - 1)) };
      if (taskId.startsWith('L3/')) opts.residual = args[2] instanceof Tensor;
      return opts;
    }
    default:
      return undefined;
  }
}

/**
 * Run a workload through the engine with every module instrumented (graphs off) and write the capture.
 * `load` builds the model from the registry it is given. Returns the index path and the index.
 */
export function captureWorkload(args: {
  baseline: ModuleRegistry;
  load: (registry: ModuleRegistry) => { model: import('./model-runner.js').CausalLM; ctx: import('@fastkernels/core').ExecutionContext; geometry: import('./engine.js').EngineGeometry; dispose(): void };
  workload: import('./workloads.js').Workload;
  engine?: import('./engine.js').EngineOptions;
  outDir: string;
  model: string;
}): { path: string; index: CaptureIndex; outputTokens: number } {
  const rec = new CaptureRecorder(args.baseline);
  const loaded = args.load(rec.registry);
  let engine: LLMEngine | null = null;
  try {
    rec.paused = true;
    engine = new LLMEngine(loaded.model, loaded.ctx, loaded.geometry, { ...args.engine, graphs: false });
    rec.paused = false;
    const out = engine.generate(args.workload.requests.map((r) => ({ promptIds: r.promptIds, params: { maxTokens: r.outputLen, ignoreEos: true } })));
    const path = rec.write(args.outDir, args.model, args.workload.name);
    return { path, index: rec.index(args.model, args.workload.name), outputTokens: out.reduce((a, o) => a + o.tokenIds.length, 0) };
  } finally {
    engine?.dispose();
    loaded.dispose();
  }
}

const isFloat = (d: DType) => d === 'f32' || d === 'bf16' || d === 'f16';

/**
 * A module fed only integers (token ids, positions: L1/embedding, L4/llama) computes in its weights' dtype; without
 * this its cases were recorded as f32 and a bf16 model's embedding and whole-model cases benched in f32.
 */
function weightDtype(m: object): DType | null {
  const params = (m as { namedParameters?: () => [string, Tensor][] }).namedParameters?.() ?? [];
  return params.map(([, t]) => t.dtype).find(isFloat) ?? null;
}
