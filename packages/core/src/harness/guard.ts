import type { AllocateOptions, Backend, Storage } from '../backend.js';
import { Tensor } from '../tensor.js';

/**
 * The harness's integrity guard (design §4 "Hardening"). It is installed in a bench worker BEFORE any
 * candidate code is loaded and:
 *
 *  - wraps `backend.allocate` so every storage the backend hands out is registered with a sequence
 *    number (outputs must be storages of the backend's allocator, allocated during the call that
 *    returned them, not a Proxy, not a subclass), and poisons new memory while correctness is checked;
 *  - snapshots and freezes the functions timing and checking depend on (timer methods,
 *    backend.createTimer/synchronize/allocate/read/copyBytes, the ops, Tensor.prototype, the clocks,
 *    Math) and re-verifies their identity at every checkpoint;
 *  - reads platform probes (OS threads, active handles, live worker threads, harness stream) that the
 *    host supplies (core stays free of node: imports).
 *
 * A violation is reported as a string; the harness turns it into REWARD_HACK.
 */

export interface GuardProbes {
  /** node:util types.isProxy. */
  isProxy?(x: unknown): boolean;
  /** OS threads of this process. */
  threads?(): number;
  /** Active libuv handles/requests (process.getActiveResourcesInfo()). */
  handles?(): readonly string[];
  /** worker_threads started and still alive (tracked). */
  workers?(): number;
  /** Backend-specific state that must not change across a call (e.g. the CUDA harness stream). */
  state?(): string;
}

export interface ResourceSnapshot {
  readonly threads: number;
  readonly handles: number;
  readonly handleKinds: string;
  readonly workers: number;
}

interface Protected {
  readonly label: string;
  readonly target: object;
  readonly key: PropertyKey;
  readonly value: unknown;
}

/** Thrown inside the harness when a check fails; benchCase turns it into REWARD_HACK. */
export class RewardHackError extends Error {
  override readonly name = 'RewardHackError';
}

const TAMPER = /Cannot (?:assign to read only property|redefine property|add property|define property|delete property) '?([^':]+)'?/;

export class HarnessGuard {
  private seq = 0;
  private readonly registry = new WeakMap<Storage, number>();
  private readonly protectedList: Protected[] = [];
  private readonly protectedNames = new Set<string>();
  private poison: number | undefined;
  private installed = false;
  private allocateFn: unknown;
  readonly violations: string[] = [];
  /** Live worker threads when the guard was installed (before any candidate code ran). */
  workersBaseline = 0;

  constructor(
    readonly backend: Backend,
    readonly probes: GuardProbes = {},
  ) {}

  /** Wrap the backend's allocator (an own, frozen property of the backend instance). Idempotent. */
  install(): this {
    if (this.installed) return this;
    this.installed = true;
    this.workersBaseline = this.probes.workers?.() ?? 0;
    const backend = this.backend;
    const original = backend.allocate.bind(backend);
    const registry = this.registry;
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const guard = this;
    const allocate = function allocate(byteLength: number, device: number, options?: AllocateOptions): Storage {
      const poison = options?.poison ?? guard.poison;
      const s = original(byteLength, device, poison === undefined ? options : { ...options, poison });
      registry.set(s, ++guard.seq);
      guard.tracking?.push(s);
      return s;
    };
    this.allocateFn = allocate;
    Object.defineProperty(backend, 'allocate', { value: allocate, writable: false, configurable: false, enumerable: false });
    return this;
  }

  private tracking: Storage[] | undefined;
  private readonly tracked = new Map<string, Storage[]>();

  /** Remember every storage allocated until the next track() call under `tag` (undefined: stop). */
  track(tag: string | undefined): void {
    if (tag === undefined) {
      this.tracking = undefined;
      return;
    }
    let list = this.tracked.get(tag);
    if (!list) this.tracked.set(tag, (list = []));
    this.tracking = list;
  }

  /** Bytes still alive of the storages tracked under `tag`; clears the list. */
  liveTracked(tag: string): number {
    const list = this.tracked.get(tag) ?? [];
    this.tracked.delete(tag);
    let n = 0;
    for (const s of list) if (!s.released) n += s.byteLength;
    return n;
  }

  /** Poison every allocation (byte pattern) until called with undefined. */
  setPoison(p: number | undefined): void {
    this.poison = p;
  }

  /** The allocation counter: storages allocated after this value are "fresh". */
  get allocationSeq(): number {
    return this.seq;
  }

  /** The sequence number of a registered storage, undefined when the allocator never handed it out. */
  storageSeq(s: Storage): number | undefined {
    return this.registry.get(s);
  }

  /**
   * Snapshot `target[key]` for every key and make each a non-writable, non-configurable own property
   * (same value), so assignments throw and the identity check passes. `freezeObject` also freezes it.
   */
  protect(label: string, target: object | undefined | null, keys?: readonly PropertyKey[], options: { freezeObject?: boolean } = {}): void {
    if (!target) return;
    const names = keys ?? functionKeys(target);
    for (const key of names) {
      let value: unknown;
      try {
        value = (target as Record<PropertyKey, unknown>)[key];
      } catch {
        continue;
      }
      const own = Object.getOwnPropertyDescriptor(target, key);
      if (!own || own.configurable) {
        try {
          Object.defineProperty(target, key, { value, writable: false, configurable: false, enumerable: own?.enumerable ?? false });
        } catch {
          // a non-extensible target: the snapshot still checks it
        }
      } else if (own.writable) {
        try {
          Object.defineProperty(target, key, { writable: false });
        } catch {
          // ignore
        }
      }
      this.protectedList.push({ label: `${label}.${String(key)}`, target, key, value });
      this.protectedNames.add(String(key));
    }
    if (options.freezeObject) {
      try {
        Object.freeze(target);
      } catch {
        // ignore
      }
    }
  }

  /** Verify every snapshot; returns the violations found now (also kept in `violations`). */
  verify(point: string): string[] {
    const found: string[] = [];
    for (const p of this.protectedList) {
      let now: unknown;
      try {
        now = (p.target as Record<PropertyKey, unknown>)[p.key];
      } catch (e) {
        now = e;
      }
      if (now !== p.value) found.push(`${p.label} was replaced (${point})`);
    }
    if (this.installed && this.backend.allocate !== this.allocateFn) found.push(`backend.allocate was replaced (${point})`);
    this.violations.push(...found);
    return found;
  }

  /** Does an error thrown by candidate code come from an attempt to patch a protected function? */
  tamperAttempt(e: unknown): string | undefined {
    const msg = e instanceof Error ? e.message : String(e);
    const m = TAMPER.exec(msg);
    if (!m) return undefined;
    const name = m[1]!.trim();
    if (this.protectedNames.has(name) || /^(now|hrtime|bigint|elapsedMs|start|stop|createTimer|synchronize|allocate)$/.test(name)) {
      return `tried to patch a protected harness function: ${msg}`;
    }
    return undefined;
  }

  resources(): ResourceSnapshot {
    const handles = this.probes.handles?.() ?? [];
    const kinds = new Map<string, number>();
    for (const h of handles) kinds.set(h, (kinds.get(h) ?? 0) + 1);
    return {
      threads: this.probes.threads?.() ?? 0,
      handles: handles.length,
      handleKinds: [...kinds].sort().map(([k, n]) => `${k}x${n}`).join(','),
      workers: this.probes.workers?.() ?? 0,
    };
  }

  /** Growth between two snapshots, in words (undefined: none). */
  static growth(before: ResourceSnapshot, after: ResourceSnapshot, what: string): string | undefined {
    if (after.workers > before.workers) return `${after.workers - before.workers} worker thread(s) started ${what}`;
    if (after.threads > before.threads) return `OS threads grew from ${before.threads} to ${after.threads} ${what}`;
    if (after.handles > before.handles) return `active handles grew from ${before.handles} to ${after.handles} ${what} (${after.handleKinds}; deferred work?)`;
    return undefined;
  }

  /**
   * Check what a call returned: each output must be a plain Tensor (exact class, not a Proxy, only data
   * properties), over a storage the backend's allocator handed out, allocated during this call (from
   * `sinceSeq` on) unless it is the storage of one of the call's arguments (in-place ops).
   */
  checkOutputs(outputs: readonly unknown[], sinceSeq: number, args: readonly (Tensor | null)[]): string | undefined {
    const argStorages = new Set(args.filter((a): a is Tensor => a !== null).map((a) => a.storage));
    for (const [i, o] of outputs.entries()) {
      const bad = this.checkTensor(o, `output ${i}`);
      if (bad) return bad;
      const t = o as Tensor;
      if (argStorages.has(t.storage)) continue;
      const seq = this.registry.get(t.storage);
      if (seq === undefined) return `output ${i} is over memory the backend's allocator never handed out (a fake storage?)`;
      if (seq <= sinceSeq) return `output ${i} is over memory allocated before this call (a cached or replayed output)`;
    }
    return undefined;
  }

  private checkTensor(o: unknown, what: string): string | undefined {
    if (typeof o !== 'object' || o === null) return `${what} is not a tensor`;
    if (this.probes.isProxy?.(o)) return `${what} is a Proxy (lazy/deferred output)`;
    if (Object.getPrototypeOf(o) !== Tensor.prototype) return `${what} is a ${(o as object).constructor?.name ?? 'non-Tensor'}, not a plain Tensor (a subclass can hide state or compute lazily)`;
    for (const [k, d] of Object.entries(Object.getOwnPropertyDescriptors(o))) {
      if (d.get || d.set) return `${what} has an accessor property '${k}' (lazy/deferred output)`;
    }
    const s = (o as Tensor).storage;
    if (this.probes.isProxy?.(s)) return `${what}'s storage is a Proxy`;
    return undefined;
  }
}

/** Function-valued keys of an object and its prototypes (not Object.prototype). */
export function functionKeys(target: object): PropertyKey[] {
  const keys = new Set<PropertyKey>();
  for (let o: object | null = target; o && o !== Object.prototype && o !== Function.prototype; o = Object.getPrototypeOf(o)) {
    for (const k of Reflect.ownKeys(o)) {
      if (k === 'constructor') continue;
      const d = Object.getOwnPropertyDescriptor(o, k);
      if (d && typeof d.value === 'function') keys.add(k);
    }
  }
  return [...keys];
}

/**
 * Protect what every backend's harness relies on: the backend methods, its timer's methods, its ops,
 * Tensor and its prototype, the clocks and Math. Called once per worker before candidates load.
 */
export function protectHarness(guard: HarnessGuard, extra: (g: HarnessGuard) => void = () => {}): void {
  const b = guard.backend;
  guard.install();
  guard.protect('backend', b, ['createTimer', 'synchronize', 'read', 'write', 'copyBytes', 'devices', 'versions']);
  const proto = Object.getPrototypeOf(b) as object;
  guard.protect(`${b.constructor.name}.prototype`, proto, functionKeys(proto).filter((k) => k !== 'allocate'));
  const timer = b.createTimer();
  const timerProto = Object.getPrototypeOf(timer) as object;
  guard.protect(`${timerProto.constructor?.name ?? 'Timer'}.prototype`, timerProto, ['start', 'stop', 'elapsedMs'], { freezeObject: true });
  guard.protect('backend.ops', b.ops);
  if (b.harnessKernels) {
    // The harness compares outputs and checks inputs through these: a patched one could pass anything.
    guard.protect('backend', b, ['harnessKernels']);
    guard.protect('backend.harnessKernels', b.harnessKernels, undefined, { freezeObject: true });
    const hkProto = Object.getPrototypeOf(b.harnessKernels) as object;
    guard.protect(`${hkProto.constructor?.name ?? 'HarnessKernels'}.prototype`, hkProto, undefined, { freezeObject: true });
  }
  guard.protect('Tensor.prototype', Tensor.prototype, undefined, { freezeObject: true });
  guard.protect('Tensor', Tensor, ['empty', 'zeros', 'fromArray'], { freezeObject: true });
  guard.protect('performance', globalThis.performance, ['now']);
  const perfProto = globalThis.performance ? (Object.getPrototypeOf(globalThis.performance) as object) : undefined;
  guard.protect('Performance.prototype', perfProto, ['now']);
  guard.protect('Date', Date, ['now']);
  guard.protect('Math', Math, undefined, { freezeObject: true });
  guard.protect('Number', Number, ['isFinite', 'isNaN']);
  guard.protect('Object', Object, ['is', 'getPrototypeOf', 'getOwnPropertyDescriptors', 'entries']);
  extra(guard);
}
