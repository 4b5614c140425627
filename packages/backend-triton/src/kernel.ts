/**
 * `tritonKernel({ source, fn, ... })`: a Triton kernel compiled through the host's Python (cached on disk) and
 * launched through backend-cuda's runtime on the current stream, in the same process and context as every other
 * kernel (so it composes, times and graph-captures like them).
 *
 * Types: give `signature` (Triton types per runtime parameter: '*bf16:16', 'i32', 'fp32', ...) for a fixed
 * specialisation and the cheapest launch, or leave parameters out to have them specialised per launch from the
 * arguments as Triton's JIT does (tensor dtype, 16-byte alignment, i32/i64, divisibility by 16). Fractional
 * scalars (eps) should be declared 'fp32': a JS number 1.0 is an integer.
 *
 * Configs: with `configs`, the best config is chosen once per shape key (the values of `key`'s parameters, by
 * default every scalar argument) by timing each with device events on the launch stream, then cached in memory
 * and on disk. Tuning launches the kernel repeatedly with the caller's arguments, so a tuned kernel must be
 * idempotent (outputs fully overwritten), and it cannot happen during CUDA graph capture: launch once before.
 */
import type { Kernel } from '@fastkernels/core';
import { numberToBf16, numberToF16 } from '@fastkernels/core';
import { CudaFatalError, CudaRuntime, type ArgValue, type DeviceBlock, type Dim3 } from '@fastkernels/backend-cuda';
import { sha256, stableJson, TritonDiskCache, tritonCacheKey } from './cache.js';
import { TritonCompileError, TritonOutOfResourcesError, TritonUnavailableError } from './errors.js';
import { buildLaunchPlan, parseCompileResult, resultForCache, scratchBytes, type CompiledTriton, type LaunchPlan, type PlanParam } from './metadata.js';
import { inferTypeString, isTensorArg, parsePythonParams, parseTritonType, pointerOf, TRITON_DTYPE, type ParamType, type PyParam, type TritonArg } from './signature.js';
import { TritonToolchain, type CompileOutcome, type CompileRequest, type ConstexprValue } from './toolchain.js';

export interface TritonConfig {
  readonly constexprs?: Readonly<Record<string, ConstexprValue>>;
  readonly numWarps?: number;
  readonly numStages?: number;
  /** Extra triton.compile options (e.g. { maxnreg: 128 }). */
  readonly options?: Readonly<Record<string, unknown>>;
}

export interface TritonKernelSpec {
  /** Python source defining the @triton.jit function (imports included). */
  readonly source: string;
  /** The @triton.jit function to compile. */
  readonly fn: string;
  /** File name shown in errors (default `<fn>.py`). */
  readonly name?: string;
  /**
   * Triton types of runtime parameters: by name (any subset; the rest are inferred per launch) or a list for
   * all of them in order. '*fp32', '*bf16:16' (16-byte aligned), 'i32', 'i64:16' (divisible by 16), 'fp32', ...
   */
  readonly signature?: Readonly<Record<string, string>> | readonly string[];
  /** tl.constexpr values (defaults in the Python source apply to the rest). 'tl.float32' names a Triton dtype. */
  readonly constexprs?: Readonly<Record<string, ConstexprValue>>;
  readonly numWarps?: number;
  readonly numStages?: number;
  readonly options?: Readonly<Record<string, unknown>>;
  /** Candidate configs (merged over constexprs/numWarps/numStages); the fastest per shape key is used. */
  readonly configs?: readonly TritonConfig[];
  /** Runtime parameters whose values select the config (default: every scalar argument). */
  readonly key?: readonly string[];
  /** Runtime parameters not specialised on divisibility by 16 (as Triton's do_not_specialize). */
  readonly doNotSpecialize?: readonly string[];
  /** The toolchain to compile with (default: the process-wide one). */
  readonly toolchain?: TritonToolchain;
}

/** What a grid function receives: the config's constexprs plus num_warps and num_stages. */
export type TritonMeta = Readonly<Record<string, unknown>>;
export type TritonGrid = Dim3 | ((meta: TritonMeta) => Dim3);

interface ResolvedConfig {
  readonly index: number;
  readonly constexprs: Readonly<Record<string, ConstexprValue>>;
  readonly numWarps: number;
  readonly numStages: number;
  readonly options: Readonly<Record<string, unknown>>;
  readonly meta: TritonMeta;
  readonly label: string;
}

interface Specialization {
  readonly key: string;
  readonly types: readonly ParamType[];
  readonly binaries: (LoadedBinary | undefined)[];
  readonly errors: (Error | undefined)[];
  readonly best: Map<string, number>;
}

/** A compiled kernel loaded into the CUDA context (shared by every TritonKernel with the same cache key). */
export interface LoadedBinary {
  readonly key: string;
  readonly compiled: CompiledTriton;
  readonly plan: LaunchPlan;
  readonly func: number;
  readonly fromCache: boolean;
  readonly block: number;
  readonly values: ArgValue[];
  readonly scratch: { global: DeviceBlock | undefined; profile: DeviceBlock | undefined };
}

export interface TuneResult {
  readonly config: number;
  readonly label: string;
  readonly ms?: number;
  readonly error?: string;
}

const LOADED = new Map<string, LoadedBinary>();
let disk: TritonDiskCache | undefined;
const diskCache = () => (disk ??= new TritonDiskCache());

export class TritonKernel implements Kernel {
  readonly language = 'triton' as const;
  readonly entry: string;
  readonly source: string;
  readonly sourceName: string;
  /** Every parameter of the Python function, in order. */
  readonly params: readonly PyParam[];
  /** The runtime (non-constexpr) parameters: what launch() takes, in order. */
  readonly argNames: readonly string[];
  readonly configs: readonly ResolvedConfig[];
  /** Tuning results of the last shape key tuned (for logs and tests). */
  lastTuning: { shapeKey: string; results: TuneResult[]; best: number; fromDisk: boolean } | undefined;
  /** Bypass the disk cache when loading (it is still written): for tests. */
  noDiskCache = false;

  private readonly fixed: readonly (ParamType | undefined)[];
  private readonly fixedElem: readonly (string | undefined)[];
  private readonly noSpecialize: readonly boolean[];
  private readonly keyIdx: readonly number[] | undefined;
  private readonly fixedSpec: Specialization | undefined;
  private readonly specs = new Map<string, Specialization>();
  private readonly identity: string;
  private rt: CudaRuntime | undefined;

  constructor(readonly spec: TritonKernelSpec) {
    this.entry = spec.fn;
    this.source = spec.source;
    this.sourceName = spec.name ?? `${spec.fn}.py`;
    this.params = parsePythonParams(spec.source, spec.fn);
    this.argNames = this.params.filter((p) => !p.constexpr).map((p) => p.name);
    const constexprNames = new Set(this.params.filter((p) => p.constexpr).map((p) => p.name));
    const idx = (name: string, what: string) => {
      const i = this.argNames.indexOf(name);
      if (i < 0) {
        throw new Error(
          `${this.sourceName}: ${what} names '${name}', which is ${constexprNames.has(name) ? 'a tl.constexpr (give it in constexprs)' : `not a parameter of ${spec.fn}`}; runtime parameters: ${this.argNames.join(', ')}`,
        );
      }
      return i;
    };
    const fixed: (ParamType | undefined)[] = this.argNames.map(() => undefined);
    if (Array.isArray(spec.signature)) {
      const list = spec.signature as readonly string[];
      if (list.length !== this.argNames.length) throw new Error(`${this.sourceName}: signature lists ${list.length} types for ${this.argNames.length} runtime parameters (${this.argNames.join(', ')})`);
      list.forEach((t, i) => (fixed[i] = parseTritonType(t, `signature of '${this.argNames[i]}'`)));
    } else if (spec.signature) {
      for (const [name, t] of Object.entries(spec.signature as Record<string, string>)) fixed[idx(name, 'signature')] = parseTritonType(t, `signature of '${name}'`);
    }
    this.fixed = fixed;
    this.fixedElem = fixed.map((t) => (t?.type.startsWith('*') ? t.type.replace(/^\*k?/, '') : undefined));
    const dns = new Set((spec.doNotSpecialize ?? []).map((n) => idx(n, 'doNotSpecialize')));
    this.noSpecialize = this.argNames.map((_, i) => dns.has(i));
    this.keyIdx = spec.key?.map((n) => idx(n, 'key'));
    for (const n of Object.keys(spec.constexprs ?? {})) if (!constexprNames.has(n)) throw new Error(`${this.sourceName}: constexprs names '${n}', which is not a tl.constexpr parameter of ${spec.fn}`);

    const base = spec.configs?.length ? spec.configs : [{}];
    this.configs = base.map((c, index) => {
      for (const n of Object.keys(c.constexprs ?? {})) if (!constexprNames.has(n)) throw new Error(`${this.sourceName}: config ${index} names '${n}', which is not a tl.constexpr parameter of ${spec.fn}`);
      const constexprs = { ...spec.constexprs, ...c.constexprs };
      const numWarps = c.numWarps ?? spec.numWarps ?? 4;
      const numStages = c.numStages ?? spec.numStages ?? 3;
      if (!Number.isInteger(numWarps) || numWarps < 1 || (numWarps & (numWarps - 1)) !== 0) throw new RangeError(`${this.sourceName}: numWarps must be a power of two, got ${numWarps}`);
      const options = { ...spec.options, ...c.options };
      const meta = Object.freeze({ ...constexprs, num_warps: numWarps, num_stages: numStages });
      const label = `${Object.entries(constexprs).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(' ')} warps=${numWarps} stages=${numStages}`.trim();
      return { index, constexprs, numWarps, numStages, options, meta, label };
    });
    this.identity = sha256(stableJson({ s: spec.source, fn: spec.fn, sig: spec.signature ?? null, cx: spec.constexprs ?? {}, cfg: this.configs.map((c) => [c.constexprs, c.numWarps, c.numStages, c.options]), key: spec.key ?? null }));
    this.fixedSpec = fixed.every((t) => t !== undefined) ? this.newSpec('fixed', fixed as ParamType[]) : undefined;
  }

  get toolchain(): TritonToolchain {
    return this.spec.toolchain ?? TritonToolchain.get();
  }

  get runtime(): CudaRuntime {
    return (this.rt ??= CudaRuntime.get());
  }

  /** Whether every runtime parameter has a type in `signature` (one specialisation, compiled ahead with compile()). */
  get fixedSignature(): boolean {
    return this.fixedSpec !== undefined;
  }

  /** Compile (or load from cache) every config now, synchronously; needs a fixed signature or example `args`. */
  compile(args?: readonly TritonArg[]): this {
    const s = this.specFor(args);
    for (let i = 0; i < this.configs.length; i++) this.binary(s, i);
    return this;
  }

  /** Compile every config through the helper without blocking the JS thread. */
  async compileAsync(args?: readonly TritonArg[]): Promise<this> {
    const s = this.specFor(args);
    await Promise.all(
      this.configs.map(async (_, i) => {
        if (s.binaries[i]) return;
        s.binaries[i] = await this.load(s, i, true);
      }),
    );
    return this;
  }

  /** The loaded binaries of a specialisation (compiling what is missing): diagnostics and tests. */
  binaries(args?: readonly TritonArg[]): LoadedBinary[] {
    const s = this.specFor(args);
    return this.configs.map((_, i) => this.binary(s, i));
  }

  /**
   * Launch on the current stream (or `stream`): `args` are the runtime parameters in order (tensors, device
   * pointers, numbers, booleans); `grid` is a Dim3 or a function of the config's meta-parameters. Block =
   * num_warps * 32 threads, dynamic shared memory as compiled; a zero-sized grid launches nothing.
   */
  launch(grid: TritonGrid, args: readonly TritonArg[], stream?: number): void {
    if (args.length !== this.argNames.length) {
      throw new RangeError(`${this.entry} takes ${this.argNames.length} runtime arguments (${this.argNames.join(', ')}), got ${args.length}`);
    }
    const s = this.fixedSpec ?? this.specialize(args);
    const ci = this.configs.length === 1 ? 0 : this.selectConfig(s, grid, args, stream);
    this.run(s.binaries[ci] ?? this.binary(s, ci), this.configs[ci]!, grid, args, stream);
  }

  // ------------------------------------------------------------------------------------------ specialisation

  private newSpec(key: string, types: readonly ParamType[]): Specialization {
    return { key, types, binaries: this.configs.map(() => undefined), errors: this.configs.map(() => undefined), best: new Map() };
  }

  private specFor(args?: readonly TritonArg[]): Specialization {
    if (this.fixedSpec) return this.fixedSpec;
    if (!args) throw new Error(`${this.entry}: some parameter types are inferred from the launch arguments; pass example args to compile(), or give every type in signature`);
    if (args.length !== this.argNames.length) throw new RangeError(`${this.entry} takes ${this.argNames.length} runtime arguments, got ${args.length}`);
    return this.specialize(args);
  }

  private specialize(args: readonly TritonArg[]): Specialization {
    let key = '';
    const n = this.argNames.length;
    for (let i = 0; i < n; i++) {
      const f = this.fixed[i];
      key += f ? '=' : inferTypeString(args[i], this.argNames[i]!, this.noSpecialize[i]);
      key += ',';
    }
    let s = this.specs.get(key);
    if (!s) {
      const parts = key.split(',');
      const types = this.argNames.map((name, i) => this.fixed[i] ?? parseTritonType(parts[i]!, `argument '${name}'`));
      s = this.newSpec(key, types);
      this.specs.set(key, s);
    }
    return s;
  }

  // ------------------------------------------------------------------------------------------ compile and load

  private binary(s: Specialization, ci: number): LoadedBinary {
    const have = s.binaries[ci];
    if (have) return have;
    const err = s.errors[ci];
    if (err) throw err;
    try {
      const b = this.load(s, ci, false) as LoadedBinary;
      s.binaries[ci] = b;
      return b;
    } catch (e) {
      if (!(e instanceof TritonUnavailableError)) s.errors[ci] = e as Error;
      throw e;
    }
  }

  /**
   * The helper request for `args`' specialisation (or the fixed signature) and config `config`; `arch` defaults to
   * the current device's (e.g. 90 on an H200). For diagnostics and tests.
   */
  compileRequest(args?: readonly TritonArg[], config = 0, arch?: number): CompileRequest {
    return this.request(this.specFor(args), config, arch);
  }

  private request(s: Specialization, ci: number, arch?: number): CompileRequest {
    const cfg = this.configs[ci]!;
    const signature: Record<string, string> = {};
    const attrs: Record<string, [string, number][]> = {};
    let j = 0;
    for (const p of this.params) {
      if (p.constexpr) {
        signature[p.name] = 'constexpr';
        continue;
      }
      const t = s.types[j++]!;
      signature[p.name] = t.type;
      if (t.div16) attrs[p.name] = [['tt.divisibility', 16]];
    }
    let cc = arch;
    let warp = 32;
    if (cc === undefined) {
      const props = this.runtime.properties();
      cc = props.major * 10 + props.minor;
      warp = props.warpSize || 32;
    }
    return {
      source: this.source,
      filename: this.sourceName,
      fn: this.entry,
      signature,
      constexprs: cfg.constexprs,
      attrs,
      options: { num_warps: cfg.numWarps, num_stages: cfg.numStages, ...cfg.options },
      target: { backend: 'cuda', arch: cc, warp_size: warp },
    };
  }

  private load(s: Specialization, ci: number, async: true): Promise<LoadedBinary>;
  private load(s: Specialization, ci: number, async: false): LoadedBinary;
  private load(s: Specialization, ci: number, async: boolean): LoadedBinary | Promise<LoadedBinary> {
    const tc = this.toolchain;
    const a = tc.requireAvailable();
    const req = this.request(s, ci);
    const key = tritonCacheKey({ ...req, arch: req.target.arch, tritonVersion: a.tritonVersion });
    const mem = LOADED.get(key);
    if (mem) return async ? Promise.resolve(mem) : mem;
    if (!this.noDiskCache) {
      const hit = diskCache().get(key);
      if (hit) {
        try {
          const b = this.finish(key, parseCompileResult(hit.json, hit.cubin), true);
          return async ? Promise.resolve(b) : b;
        } catch (e) {
          if (e instanceof TritonOutOfResourcesError) throw e;
          /* a corrupt or foreign entry: compile again */
        }
      }
    }
    const store = (out: CompileOutcome) => {
      diskCache().put(key, resultForCache(out.raw), out.compiled.cubin);
      return this.finish(key, out.compiled, false);
    };
    return async ? tc.compileAsync(req).then(store) : store(tc.compileSync(req));
  }

  private finish(key: string, c: CompiledTriton, fromCache: boolean): LoadedBinary {
    const again = LOADED.get(key);
    if (again) return again;
    if (c.launchCooperativeGrid || c.launchPdl || c.numCtas > 1) {
      throw new Error(`${this.entry}: the compiled kernel needs ${c.numCtas > 1 ? `${c.numCtas}-CTA clusters` : c.launchPdl ? 'programmatic dependent launch' : 'a cooperative launch'} (cuLaunchKernelEx), which backend-cuda's launch does not do; compile with num_ctas=1 and without launch_pdl / launch_cooperative_grid`);
    }
    const names = this.params.map((p) => p.name);
    if (c.argNames.join(',') !== names.join(',')) throw new Error(`${this.entry}: Triton reports parameters (${c.argNames.join(', ')}), the source was read as (${names.join(', ')})`);
    const plan = buildLaunchPlan(c);
    const rt = this.runtime;
    const optin = rt.properties().sharedPerBlockOptin;
    if (c.shared > optin) {
      throw new TritonOutOfResourcesError(`${this.entry}: the compiled kernel needs ${c.shared} bytes of shared memory; this device allows ${optin} per block (use smaller blocks or fewer stages)`);
    }
    const mod = rt.loadModule(c.cubin, `triton:${key}`, fromCache, c.compileMs);
    const func = mod.function(c.name);
    if (c.shared > 48 * 1024) rt.setMaxDynamicShared(func, c.shared);
    const b: LoadedBinary = {
      key, compiled: c, plan, func, fromCache, block: c.numWarps * 32,
      values: plan.params.map(() => 0), scratch: { global: undefined, profile: undefined },
    };
    LOADED.set(key, b);
    return b;
  }

  // ------------------------------------------------------------------------------------------ launch

  private run(b: LoadedBinary, cfg: ResolvedConfig, grid: TritonGrid, args: readonly TritonArg[], stream: number | undefined): void {
    const g = typeof grid === 'function' ? grid(cfg.meta) : grid;
    let gx: number, gy: number, gz: number;
    if (typeof g === 'number') {
      gx = g;
      gy = gz = 1;
    } else {
      gx = g[0];
      gy = g[1] ?? 1;
      gz = g[2] ?? 1;
    }
    const programs = gx * gy * gz;
    if (programs === 0) return;
    if (!(programs > 0) || !Number.isInteger(programs)) throw new RangeError(`${this.entry}: bad grid ${JSON.stringify(g)}`);
    const vals = b.values;
    const params = b.plan.params;
    const n = b.plan.argCount;
    for (let i = 0; i < n; i++) vals[i] = this.encode(params[i]!, args[i]!, i);
    if (b.plan.globalScratchIndex >= 0) vals[b.plan.globalScratchIndex] = this.scratch(b, 'global', programs);
    if (b.plan.profileScratchIndex >= 0) vals[b.plan.profileScratchIndex] = this.scratch(b, 'profile', programs);
    (this.rt ?? this.runtime).launch(b.func, g, b.block, b.compiled.shared, b.plan.layout, vals, stream);
  }

  private encode(p: PlanParam, v: TritonArg, i: number): ArgValue {
    switch (p.encoding) {
      case 'ptr': {
        const elem = this.fixedElem[i];
        if (elem !== undefined && isTensorArg(v) && TRITON_DTYPE[v.dtype] !== elem) {
          throw new TypeError(`${this.entry}: argument '${p.argName}' is declared ${p.tritonType} but got a ${v.dtype} tensor`);
        }
        if (this.fixed[i]?.div16) {
          const addr = pointerOf(v);
          if (addr !== undefined && addr % 16 !== 0) throw new RangeError(`${this.entry}: argument '${p.argName}' is declared 16-byte aligned (':16') but its address ${addr} is not`);
        }
        if (typeof v === 'boolean') throw new TypeError(`${this.entry}: argument '${p.argName}' is a pointer, got a boolean`);
        return v as ArgValue;
      }
      case 'int':
        if (typeof v === 'boolean') return v ? 1 : 0;
        if (this.fixed[i]?.div16 && typeof v === 'number' && v % 16 !== 0) throw new RangeError(`${this.entry}: argument '${p.argName}' is declared divisible by 16 (':16') but is ${v}`);
        return v as ArgValue;
      case 'float':
        return v as ArgValue;
      case 'f16':
        return numberToF16(v as number);
      case 'bf16':
        return numberToBf16(v as number);
      case 'bool':
        return v ? 1 : 0;
      case 'bytes':
        return v as ArgValue;
    }
  }

  private scratch(b: LoadedBinary, which: 'global' | 'profile', programs: number): number {
    const c = b.compiled;
    const bytes = scratchBytes(which === 'global' ? c.globalScratchSize : c.profileScratchSize, programs, c.numCtas);
    if (bytes === 0) return 0;
    let blk = b.scratch[which];
    if (!blk || blk.size < bytes) {
      const rt = this.runtime;
      if (blk) rt.free(blk);
      blk = rt.allocate(bytes);
      b.scratch[which] = blk;
    }
    return blk.ptr;
  }

  // ------------------------------------------------------------------------------------------ configs

  /** The shape key of a launch: the values of `key`'s parameters, by default every scalar argument. */
  shapeKey(args: readonly TritonArg[]): string {
    let k = '';
    if (this.keyIdx) {
      for (const i of this.keyIdx) k += `${String(args[i])},`;
      return k;
    }
    for (let i = 0; i < args.length; i++) {
      const v = args[i];
      if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean') k += `${String(v)},`;
    }
    return k;
  }

  private selectConfig(s: Specialization, grid: TritonGrid, args: readonly TritonArg[], stream: number | undefined): number {
    const sk = this.shapeKey(args);
    const hit = s.best.get(sk);
    if (hit !== undefined) return hit;
    const ci = this.tune(s, grid, args, stream, sk);
    s.best.set(sk, ci);
    return ci;
  }

  private tune(s: Specialization, grid: TritonGrid, args: readonly TritonArg[], stream: number | undefined, sk: string): number {
    const rt = this.runtime;
    if (rt.capturing) {
      throw new Error(`${this.entry}: choosing among ${this.configs.length} configs (shape key '${sk}') needs timed launches, which cannot happen during CUDA graph capture; launch the kernel once with these shapes before capturing`);
    }
    const a = this.toolchain.requireAvailable();
    const props = rt.properties();
    const tuneName = `tune-${sha256(stableJson({ v: 1, id: this.identity, spec: s.key, shape: sk, device: props.name, cc: props.computeCapability, triton: a.tritonVersion }))}`;
    const saved = this.noDiskCache ? undefined : (diskCache().getJson(tuneName) as { config?: unknown } | undefined);
    if (saved && typeof saved.config === 'number' && Number.isInteger(saved.config) && saved.config >= 0 && saved.config < this.configs.length) {
      try {
        this.binary(s, saved.config);
        this.lastTuning = { shapeKey: sk, results: [], best: saved.config, fromDisk: true };
        return saved.config;
      } catch {
        /* the saved config no longer compiles: tune again */
      }
    }
    const results: TuneResult[] = [];
    const st = stream ?? rt.stream;
    for (const cfg of this.configs) {
      let b: LoadedBinary;
      try {
        b = this.binary(s, cfg.index);
      } catch (e) {
        if (e instanceof TritonUnavailableError) throw e;
        results.push({ config: cfg.index, label: cfg.label, error: firstLine(e) });
        continue;
      }
      try {
        results.push({ config: cfg.index, label: cfg.label, ms: this.time(b, cfg, grid, args, st) });
      } catch (e) {
        if (e instanceof CudaFatalError) throw e;
        results.push({ config: cfg.index, label: cfg.label, error: firstLine(e) });
      }
    }
    const ok = results.filter((r) => r.ms !== undefined);
    if (!ok.length) {
      const firstCompile = this.configs.map((_, i) => s.errors[i]).find((e) => e instanceof TritonCompileError && e.kind !== 'out_of_resources' && e.kind !== 'ptxas');
      if (firstCompile) throw firstCompile;
      throw new Error(`${this.entry}: no config compiled and ran for shape key '${sk}':\n${results.map((r) => `  [${r.config}] ${r.label}: ${r.error}`).join('\n')}`);
    }
    const best = ok.reduce((x, y) => (y.ms! < x.ms! ? y : x));
    diskCache().putJson(tuneName, { config: best.config, label: best.label, ms: best.ms, shapeKey: sk, results });
    this.lastTuning = { shapeKey: sk, results, best: best.config, fromDisk: false };
    return best.config;
  }

  /** Median time of one launch (ms): a checked warm-up, then 5 rounds of ~2 ms each, timed with events. */
  private time(b: LoadedBinary, cfg: ResolvedConfig, grid: TritonGrid, args: readonly TritonArg[], st: number): number {
    const rt = this.runtime;
    const addon = rt.addon;
    const e0 = rt.acquireEvent();
    const e1 = rt.acquireEvent();
    try {
      this.run(b, cfg, grid, args, st);
      addon.streamSynchronize(st);
      addon.eventRecord(e0, st);
      this.run(b, cfg, grid, args, st);
      addon.eventRecord(e1, st);
      addon.eventSynchronize(e1);
      const one = Math.max(addon.eventElapsed(e0, e1), 1e-3);
      const reps = Math.max(1, Math.min(200, Math.round(2 / one)));
      const times: number[] = [];
      for (let r = 0; r < 5; r++) {
        addon.eventRecord(e0, st);
        for (let k = 0; k < reps; k++) this.run(b, cfg, grid, args, st);
        addon.eventRecord(e1, st);
        addon.eventSynchronize(e1);
        times.push(addon.eventElapsed(e0, e1) / reps);
      }
      times.sort((x, y) => x - y);
      return times[2]!;
    } finally {
      rt.releaseEvent(e0);
      rt.releaseEvent(e1);
    }
  }
}

function firstLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0]!;
}

/** Declare a Triton kernel for a candidate or a module; nothing is compiled until first use. */
export function tritonKernel(spec: TritonKernelSpec): TritonKernel {
  return new TritonKernel(spec);
}

/** Forget loaded binaries (tests that unload contexts). */
export function clearLoadedTritonBinaries(): void {
  LOADED.clear();
}
