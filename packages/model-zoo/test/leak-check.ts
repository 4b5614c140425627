/**
 * Test-only leak check of a task's forward: what one call leaves allocated beyond its outputs, on the CPU backend (its
 * storages count their holders; a tensor handle holds one reference). Two kinds of leak, both once per call (per layer
 * and step in the engine):
 * - a storage forward allocated that stays alive once its outputs are disposed (an intermediate no OpScope owns, or a
 *   view of one never disposed);
 * - a handle forward left on an input's or parameter's storage (a view never disposed): it frees nothing now, but
 *   keeps the storage alive after its owner disposes it.
 * The contract tests snapshot right before forward, after makeInputs: an engine step's caches, metadata and state
 * pools (task-batch.ts, qwen3-next-step.ts, kimi-linear-step.ts) are built there and live across calls on purpose, so
 * they are outside the count. The one exemption: a storage forward allocated that the module itself releases in its
 * dispose() is a cache the module owns (YOLOv10DetectHead's anchors, one per feature-map size), not a leak per call.
 */
import { Tensor, type Backend, type Module, type Storage } from '@fastkernels/core';

const refCount = (s: Storage): number | undefined => (s as { refCount?: number }).refCount;

export interface LeakSnapshot {
  readonly backend: Backend;
  /** Storages allocated from the snapshot on (while tracking). */
  readonly allocated: Storage[];
  /** The handles the caller owns (inputs, parameters): forward's result may be these very objects. */
  readonly owned: ReadonlySet<Tensor>;
  /** Holders of each input / parameter storage before forward, with a name for the message. */
  readonly refs: ReadonlyMap<Storage, { name: string; refs: number }>;
}

type Allocate = Backend['allocate'];

/**
 * Read right before forward and track the storages allocated from here until disposeAndFindLeaks; null where the
 * backend counts no holders (only the CPU backend does: the check is then skipped).
 */
export function leakSnapshot(backend: Backend, inputs: readonly (Tensor | null | undefined)[], module: Module): LeakSnapshot | null {
  if (!('memoryStats' in backend)) return null;
  const named: [string, Tensor][] = [...inputs.flatMap((t, i) => (t ? [[`input ${i}`, t] as [string, Tensor]] : [])), ...module.namedParameters()];
  const refs = new Map<Storage, { name: string; refs: number }>();
  for (const [name, t] of named) {
    const r = refCount(t.storage);
    if (r !== undefined && !refs.has(t.storage)) refs.set(t.storage, { name, refs: r });
  }
  const allocated: Storage[] = [];
  const b = backend as { allocate: Allocate };
  delete (b as Partial<{ allocate: Allocate }>).allocate; // a wrapper a failed test left (forward threw) goes first
  const allocate = b.allocate;
  b.allocate = function (this: Backend, ...a: Parameters<Allocate>) {
    const s = allocate.apply(this, a);
    allocated.push(s);
    return s;
  };
  return { backend, allocated, owned: new Set(named.map(([, t]) => t)), refs };
}

/**
 * Stop tracking; dispose what forward returned (its result, a tensor or an array of tensors / nulls, and the task's
 * collected outputs), each handle once, except handles that are the inputs or parameters themselves (an in-place task
 * returns the caches it was given: the caller still owns those); then dispose the module. Returns what leaked: an
 * empty list when nothing did.
 */
export function disposeAndFindLeaks(snap: LeakSnapshot, result: unknown, collected: readonly (Tensor | null | undefined)[], module: Module): string[] {
  delete (snap.backend as Partial<{ allocate: Allocate }>).allocate;
  const raw = Array.isArray(result) ? (result as unknown[]) : [result];
  const seen = new Set<Tensor>();
  for (const t of [...raw, ...collected]) {
    if (!(t instanceof Tensor) || snap.owned.has(t) || seen.has(t)) continue;
    seen.add(t);
    t.dispose();
  }
  const found: string[] = [];
  for (const [s, { name, refs }] of snap.refs) {
    const now = s.released ? 0 : refCount(s)!;
    if (now !== refs) found.push(`${now - refs} handle(s) left on ${name}'s storage (dispose the views forward makes of it)`);
  }
  module.dispose(); // releases the module's own caches (the exemption above)
  const left = snap.allocated.filter((s) => !s.released);
  if (left.length > 0) found.push(`${left.length} storage(s) forward allocated left alive beyond its outputs (own intermediates with OpScope), bytes ${left.map((s) => s.byteLength).join(', ')}`);
  return found;
}
