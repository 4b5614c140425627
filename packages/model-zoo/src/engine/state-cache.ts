import { DTYPE_INFO, Tensor, type Backend } from '@fastkernels/core';
import { layerCacheSpecs, type CacheGeometry } from './cache-spec.js';
import type { LayerStateCache } from './forward-context.js';

/**
 * The recurrent-state pool beside the paged KV cache (vLLM's mamba cache): for every recurrent layer, each of its state
 * tensors as [numSlots, ...shape], indexed by layer (attention layers have none). A sequence's slot (StateSlotManager)
 * selects its row in every layer; the recurrent ops read and update the rows in place through the step's state indices,
 * so a captured decode graph updates the state inside the graph.
 */
export class StateCache {
  readonly layers: (LayerStateCache | undefined)[];
  readonly bytes: number;

  constructor(
    readonly backend: Backend,
    readonly device: number,
    geometry: CacheGeometry,
    readonly numSlots: number,
  ) {
    let bytes = 0;
    this.layers = layerCacheSpecs(geometry).map((spec) => {
      if (spec.kind !== 'recurrent') return undefined;
      const states = spec.states.map((st) => {
        bytes += numSlots * st.shape.reduce((a, b) => a * b, 1) * DTYPE_INFO[st.dtype].itemsize;
        return Tensor.zeros(backend, [numSlots, ...st.shape], st.dtype, { device });
      });
      return { states };
    });
    this.bytes = bytes;
  }

  /** Zero the slots' rows in every layer: sequences that start from position 0 (FLA's initial_state = None). */
  reset(slots: readonly number[]): void {
    for (const l of this.layers) {
      if (!l) continue;
      for (const t of l.states) {
        for (const s of slots) {
          const row = t.select(0, s);
          row.fill_(0);
          row.dispose();
        }
      }
    }
  }

  dispose(): void {
    for (const l of this.layers) for (const t of l?.states ?? []) t.dispose();
  }
}
