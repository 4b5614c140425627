import { DTYPE_INFO, Module, defineTask, hostArray, type Tensor } from '@fastkernels/core';
import { bytesOf, randn } from '../../../common/inputs.js';
import type { GELU } from '../../../layers/activation.js';
import type { LayerNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import { initEncoderParameters } from '../cases.js';
import { BGE_M3, COLBERTV2, tinyEncoderConfig, type EncoderConfig } from '../config.js';
import { FAMILY } from '../family.js';
import { linearGelu, residualLayerNorm } from '../fusion.js';
import { refGelu, refLinear } from '../reference.js';

type Act = EncoderConfig['hiddenAct'];

/**
 * HF XLMRobertaIntermediate / BertIntermediate: dense (L1/linear, bias) then the activation (L1/gelu: exact for
 * hidden_act 'gelu', tanh for gelu_new), as linear's activation epilogue while both are ours (fusion.ts).
 * forward(hiddenStates [..., H]) -> [..., I]. The task's module.
 */
export class EncoderIntermediate extends Module {
  readonly dense: Linear;
  readonly act: GELU;
  constructor(
    readonly hiddenSize: number,
    readonly intermediateSize: number,
    readonly hiddenAct: Act = 'gelu',
  ) {
    super();
    this.dense = this.createModule('dense', 'L1/linear', hiddenSize, intermediateSize, true);
    this.act = this.registerModule('intermediate_act_fn', createLayer('GELU', hiddenAct === 'gelu_tanh' ? 'tanh' : 'none'));
  }

  forward(hiddenStates: Tensor): Tensor {
    return linearGelu(this.dense, this.act, hiddenStates);
  }
}

/**
 * HF XLMRobertaOutput / BertOutput: LayerNorm(dense(h) + input) (one add_layer_norm while the LayerNorm is ours).
 * forward(h [..., I], input [..., H]) -> [..., H].
 * Built with `new` by the layer (it is the second class of the encoder_mlp task, not a task of its own); its children
 * resolve through the registry, so L1 candidates apply inside it.
 */
export class EncoderOutput extends Module {
  readonly dense: Linear;
  readonly layerNorm: LayerNorm;
  constructor(
    readonly intermediateSize: number,
    readonly hiddenSize: number,
    readonly layerNormEps = 1e-5,
  ) {
    super();
    this.dense = this.createModule('dense', 'L1/linear', intermediateSize, hiddenSize, true);
    this.layerNorm = this.registerModule('LayerNorm', createLayer('LayerNorm', hiddenSize, layerNormEps));
  }

  forward(hiddenStates: Tensor, inputTensor: Tensor): Tensor {
    const o = this.dense.forward(hiddenStates);
    try {
      return residualLayerNorm(this.layerNorm, o, inputTensor);
    } finally {
      o.dispose();
    }
  }
}

const mlpCase = (name: string, dtype: 'f32' | 'bf16', cfg: EncoderConfig, T: number) => ({
  name, dtype, dims: { T, H: cfg.hiddenSize, I: cfg.intermediateSize }, init: [cfg.hiddenSize, cfg.intermediateSize, cfg.hiddenAct],
});

export const encoderMlpTask = defineTask(
  {
    id: 'L2/encoder_mlp',
    level: 2,
    className: 'EncoderIntermediate',
    family: [FAMILY],
    architectures: ['bge_m3', 'colbertv2'],
    mirrors: 'transformers.models.xlm_roberta.modeling_xlm_roberta.XLMRobertaIntermediate',
    description: 'Encoder FFN up-projection with GELU (EncoderIntermediate); its partner EncoderOutput (down-projection, residual, LayerNorm) lives in the same file.',
    init: [
      { name: 'hiddenSize', type: 'int' },
      { name: 'intermediateSize', type: 'int' },
      { name: 'hiddenAct', type: 'enum', choices: ['gelu', 'gelu_tanh'], optional: true, default: 'gelu' },
    ],
    inputs: [{ name: 'hiddenStates', dtype: 'act', shape: ['T', 'H'] }],
    outputs: [{ name: 'out', dtype: 'act', shape: ['T', 'I'] }],
    imports: ['L1/linear', 'L1/gelu'],
    cases: {
      ci: [
        mlpCase('tiny-f32', 'f32', tinyEncoderConfig(), 13),
        mlpCase('tiny-tanh-bf16', 'bf16', tinyEncoderConfig({ hiddenAct: 'gelu_tanh' }), 6),
      ],
      production: [mlpCase('bge-m3-16k-tokens', 'bf16', BGE_M3, 16384), mlpCase('bge-m3-8192', 'bf16', BGE_M3, 8192), mlpCase('colbertv2-5760', 'bf16', COLBERTV2, 5760)],
    },
  },
  {
    baseline: EncoderIntermediate,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.T!, c.dims.H!], c.dtype)],
    initParameters: (m, _c, rng) => initEncoderParameters(m, rng),
    reference: ([x], params, c) => {
      const act = (c.init[2] as Act | undefined) ?? 'gelu';
      const y = refLinear(x!.data, c.dims.T!, params.get('dense.weight')!, params.get('dense.bias')!).map((v) => refGelu(v, act));
      return [hostArray([c.dims.T!, c.dims.I!], y)];
    },
    work: (c) => {
      const { T, H, I } = c.dims as { T: number; H: number; I: number };
      const it = DTYPE_INFO[c.dtype].itemsize;
      return { bytes: bytesOf([I, H], it) + bytesOf([T, H], it) + 2 * bytesOf([T, I], it), flops: 2 * T * H * I + 10 * T * I };
    },
  },
);
