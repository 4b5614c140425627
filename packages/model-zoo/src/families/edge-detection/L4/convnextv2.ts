import { Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import type { ImagePreprocess, VisionModel } from '../../../engine/vision-model.js';
import type { Conv2d } from '../../../layers/conv.js';
import type { LayerNorm } from '../../../layers/norm.js';
import { createLayer } from '../../../layers/registry.js';
import type { GlobalAvgPool2d } from '../../../tasks/L1/conv/global_avg_pool2d.js';
import type { Linear } from '../../../tasks/L1/linear/linear.js';
import type { LayerNorm2d } from '../../../tasks/L1/norm/layer_norm2d.js';
import { blockBytes, blockFlops, initConvNextParameters, itemsize, stageSides } from '../convnextv2/cases.js';
import { CONVNEXTV2_BASE_384, tinyConvNextV2Config, type ConvNextV2Config } from '../convnextv2/config.js';
import { refConvNextV2 } from '../convnextv2/reference.js';
import { FAMILY } from '../family.js';
import type { ConvNeXtV2Stage } from '../L3/convnextv2_stage.js';

/** ImageNet's mean and std (HF IMAGENET_DEFAULT_MEAN / _STD), what ConvNextImageProcessor normalises by. */
export const IMAGENET_MEAN = [0.485, 0.456, 0.406] as const;
export const IMAGENET_STD = [0.229, 0.224, 0.225] as const;

/**
 * HF ConvNextV2ForImageClassification: ConvNextV2Model (embeddings: patch conv + LayerNorm2d; the stages; pooler:
 * global average pool then LayerNorm(eps layer_norm_eps)) and the classifier Linear. forward(pixel_values [B, C, S, S])
 * -> logits [B, num_labels]. Checkpoint names are HF's (convnextv2.embeddings.patch_embeddings.weight,
 * convnextv2.encoder.stages.2.layers.26.grn.weight, convnextv2.layernorm.bias, classifier.weight).
 */
export class ConvNextV2ForImageClassification extends Module implements VisionModel {
  readonly patchEmbeddings: Conv2d;
  readonly embeddingsNorm: LayerNorm2d;
  readonly stages: ConvNeXtV2Stage[] = [];
  readonly pool: GlobalAvgPool2d;
  readonly layernorm: LayerNorm;
  readonly classifier: Linear;
  readonly imageSize: number;
  readonly labels: readonly string[] | null;
  /**
   * ConvNextImageProcessor: below 384 px the shortest edge goes to S / crop_pct (0.875) and the centre S x S is cut,
   * from 384 up the image is resized straight to S x S; bicubic, ImageNet mean / std.
   */
  readonly preprocess: ImagePreprocess;
  constructor(readonly config: ConvNextV2Config) {
    super();
    const m = 'convnextv2';
    const h = config.hiddenSizes;
    this.imageSize = config.imageSize;
    this.labels = config.id2label;
    this.preprocess = { kind: 'resize', cropPct: config.imageSize < 384 ? 224 / 256 : null, resample: 'bicubic', mean: IMAGENET_MEAN, std: IMAGENET_STD };
    this.patchEmbeddings = this.registerModule(`${m}.embeddings.patch_embeddings`, createLayer('Conv2d', config.numChannels, h[0]!, config.patchSize, config.patchSize));
    this.embeddingsNorm = this.createModule(`${m}.embeddings.layernorm`, 'L1/layer_norm2d', h[0]!, 1e-6);
    let prev = h[0]!;
    h.forEach((out, i) => {
      this.stages.push(this.createModule(`${m}.encoder.stages.${i}`, 'L3/convnextv2_stage', config, prev, out, 2, i > 0 ? 2 : 1, config.depths[i]!));
      prev = out;
    });
    this.pool = this.createModule('pooler', 'L1/global_avg_pool2d');
    this.layernorm = this.registerModule(`${m}.layernorm`, createLayer('LayerNorm', prev, config.layerNormEps));
    this.classifier = this.createModule('classifier', 'L1/linear', prev, config.numLabels, true);
  }

  forward(pixelValues: Tensor): Tensor {
    if (pixelValues.rank !== 4 || pixelValues.shape[1] !== this.config.numChannels) {
      throw new RangeError(`ConvNextV2ForImageClassification: pixel_values must be [B, ${this.config.numChannels}, H, W], got [${pixelValues.shape.join(', ')}]`);
    }
    let h = this.patchEmbeddings.forward(pixelValues);
    const step = (next: Tensor) => {
      h.dispose();
      h = next;
    };
    step(this.embeddingsNorm.forward(h));
    for (const s of this.stages) step(s.forward(h));
    step(this.pool.forward(h));
    step(this.layernorm.forward(h));
    step(this.classifier.forward(h));
    return h;
  }
}

/** A model case: the config as init, pixel values [B, C, S, S] -> logits [B, L]. */
const modelCase = (name: string, dtype: 'f32' | 'bf16', config: ConvNextV2Config, B: number) => ({ name, dtype, dims: { B, C: config.numChannels, S: config.imageSize, L: config.numLabels }, init: [config] });

export const convnextv2Task = defineTask(
  {
    id: 'L4/convnextv2',
    level: 4,
    className: 'ConvNextV2ForImageClassification',
    family: [FAMILY],
    architectures: ['convnextv2'],
    mirrors: 'transformers.models.convnextv2.modeling_convnextv2.ConvNextV2ForImageClassification',
    description: 'ConvNeXt-V2 image classifier end to end: patch-conv stem, four stages of ConvNeXt-V2 blocks, global average pool + LayerNorm, linear classifier.',
    init: [{ name: 'config', type: 'object', doc: 'ConvNextV2Config (config.json: hidden_sizes, depths, image_size, num_labels, ...)' }],
    inputs: [{ name: 'pixelValues', dtype: 'act', shape: ['B', 'C', 'S', 'S'], optional: false }],
    outputs: [{ name: 'logits', dtype: 'act', shape: ['B', 'L'], optional: false }],
    imports: ['L1/conv2d', 'L1/layer_norm2d', 'L3/convnextv2_stage', 'L1/global_avg_pool2d', 'L1/layer_norm', 'L1/linear'],
    tolerance: { bf16: { atol: 0.1, rtol: 0.05 } },
    cases: {
      ci: [modelCase('tiny-32px-f32', 'f32', tinyConvNextV2Config(), 2), modelCase('tiny-32px-bf16', 'bf16', tinyConvNextV2Config(), 1)],
      // facebook/convnextv2-base-22k-384: 384 x 384 ImageNet-1k classification, batch 1 and 32
      production: [modelCase('convnextv2-base-384-bs1', 'bf16', CONVNEXTV2_BASE_384, 1), modelCase('convnextv2-base-384-bs32', 'bf16', CONVNEXTV2_BASE_384, 32)],
    },
  },
  {
    baseline: ConvNextV2ForImageClassification,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.B!, c.dims.C!, c.dims.S!, c.dims.S!], c.dtype)],
    initParameters: (m, _c, rng) => initConvNextParameters(m, rng),
    reference: ([x], P, c) => [refConvNextV2(x!, P, c.init[0] as ConvNextV2Config)],
    work: (c) => {
      const cfg = c.init[0] as ConvNextV2Config;
      const { B, S } = c.dims as Record<string, number>;
      const it = itemsize(c.dtype);
      const sides = stageSides(cfg, S!);
      const s0 = sides[0]!;
      let flops = 2 * B! * s0 * s0 * cfg.hiddenSizes[0]! * cfg.numChannels * cfg.patchSize ** 2;
      let bytes = it * B! * (cfg.numChannels * S! * S! + cfg.numLabels);
      cfg.hiddenSizes.forEach((C, i) => {
        const side = sides[i]!;
        if (i > 0) flops += 2 * B! * side * side * C * cfg.hiddenSizes[i - 1]! * 4;
        flops += cfg.depths[i]! * blockFlops(B!, C, side, side);
        bytes += cfg.depths[i]! * blockBytes(B!, C, side, side, it);
      });
      return { bytes, flops: flops + 2 * B! * cfg.hiddenSizes.at(-1)! * cfg.numLabels };
    },
  },
);
