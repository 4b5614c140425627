/**
 * GLA on the engine: the model interface the runner calls (vLLM's *ForCausalLM: forward(input_ids [T], positions [T]) ->
 * hidden [T, D] over the step's packed tokens, compute_logits(hidden rows)), with each layer's recurrent state in the
 * engine's state pool (the forward context's stateCaches, rows picked by the step's state indices). The same module tree
 * and checkpoint names as L4/gla (model.embeddings, model.layers.N, model.norm, lm_head), its blocks built through the
 * registry (L3/gla_decoder, and below it L2/gla_attention, L1/chunk_gla, L1/fused_recurrent_gla: candidates apply);
 * L4/gla itself, FLA's forward(ids [B, T], state) -> [logits, state], is the state-in / state-out form of the same model.
 */
import { Module, withContext, type ExecutionContext, type Tensor } from '@fastkernels/core';
import type { CausalLM } from '../../engine/model-runner.js';
import type { Linear } from '../../tasks/L1/linear/linear.js';
import type { GlaConfig } from './config.js';
import { GLAModel } from './L4/gla.js';

export class GLACausalLM extends Module implements CausalLM {
  readonly model: GLAModel;
  readonly lmHead: Linear;
  constructor(readonly config: GlaConfig) {
    super();
    this.model = this.registerModule('model', new GLAModel(config));
    this.lmHead = this.createModule('lm_head', 'L1/linear', config.hiddenSize, config.vocabSize, false);
  }

  /** The step's tokens through every block as one [1, T, D] row (positions unused: GLA has no rotary embedding). */
  forward(inputIds: Tensor, _positions: Tensor): Tensor {
    const T = inputIds.shape[0]!;
    const D = this.config.hiddenSize;
    const m = this.model;
    const e = m.embeddings.forward(inputIds);
    let h = e.view([1, T, D]);
    e.dispose();
    try {
      for (const layer of m.layers) {
        // the layer reads and updates its state in the pool; the second output is a view of it
        const [out, state] = layer.forward(h, null) as [Tensor, Tensor];
        state.dispose();
        h.dispose();
        h = out;
      }
      const flat = h.reshape([T, D]);
      const n = m.norm.forward(flat) as Tensor;
      flat.dispose();
      return n;
    } finally {
      h.dispose();
    }
  }

  computeLogits(hiddenStates: Tensor): Tensor {
    return this.lmHead.forward(hiddenStates);
  }

  /** Build in ctx (the registry resolves the blocks). */
  static create(ctx: ExecutionContext, config: GlaConfig): GLACausalLM {
    return withContext(ctx, () => new GLACausalLM(config));
  }
}
