/**
 * ConvNeXt-V2's config.json as HF transformers writes it (ConvNextV2Config), the fields the model reads:
 *
 *   architectures        ["ConvNextV2ForImageClassification"] (or model_type "convnextv2")
 *   num_channels         input channels                                              default 3
 *   patch_size           stem conv kernel and stride                                 default 4
 *   num_stages           stages (= hidden_sizes / depths length)                     default 4
 *   hidden_sizes         width of each stage                                         default [96, 192, 384, 768]
 *   depths               blocks of each stage                                        default [3, 3, 9, 3]
 *   hidden_act           the blocks' activation: gelu, gelu_new / gelu_pytorch_tanh, relu   default gelu
 *   layer_norm_eps       eps of the pooler's LayerNorm (the blocks' norms use 1e-6)  default 1e-12
 *   image_size           square input size                                           default 224
 *   num_labels / id2label classifier outputs (PretrainedConfig: id2label's size, else num_labels, else 2)
 *   torch_dtype          float32 / bfloat16 / float16                                optional
 *   initializer_gain     random weights: per-fan-in init at this gain (weights/init-scale.ts; not an HF field)  default 1
 *
 * drop_path_rate is training-only (identity at inference) and not read.
 */
import { UserError, type DType } from '@fastkernels/core';
import { z } from 'zod';

export type ConvNextV2Act = 'gelu' | 'gelu_new' | 'gelu_pytorch_tanh' | 'relu';

export interface ConvNextV2Config {
  readonly numChannels: number;
  readonly patchSize: number;
  readonly numStages: number;
  readonly hiddenSizes: readonly number[];
  readonly depths: readonly number[];
  readonly hiddenAct: ConvNextV2Act;
  readonly layerNormEps: number;
  readonly imageSize: number;
  readonly numLabels: number;
  /** Class names by index (config.json's id2label), when it has them. */
  readonly id2label: readonly string[] | null;
  readonly dtype: DType | null;
  readonly initializerGain: number;
}

const DTYPES: Record<string, DType> = { float16: 'f16', bfloat16: 'bf16', float32: 'f32' };
const posInt = z.number().int().positive();

const Schema = z.looseObject({
  num_channels: posInt.default(3),
  patch_size: posInt.default(4),
  num_stages: posInt.default(4),
  hidden_sizes: z.array(posInt).min(1).default([96, 192, 384, 768]),
  depths: z.array(posInt).min(1).default([3, 3, 9, 3]),
  hidden_act: z.enum(['gelu', 'gelu_new', 'gelu_pytorch_tanh', 'relu']).default('gelu'),
  layer_norm_eps: z.number().positive().default(1e-12),
  image_size: posInt.default(224),
  num_labels: posInt.optional(),
  id2label: z.record(z.string().regex(/^\d+$/, 'keys must be class indices'), z.string()).optional(),
  torch_dtype: z.enum(['float16', 'bfloat16', 'float32']).optional(),
  dtype: z.enum(['float16', 'bfloat16', 'float32']).optional(),
  initializer_gain: z.number().positive().max(10).default(1),
});

const fail = (file: string, field: string, message: string): never => {
  throw new UserError(`invalid field ${field} in ${file}: ${message}`, { field, fix: 'see the ConvNeXt-V2 config fields in packages/model-zoo/src/families/edge-detection/convnextv2/config.ts' });
};

/** Parse a ConvNeXt-V2 config.json; a UserError naming the file and the field otherwise. */
export function parseConvNextV2Config(raw: unknown, file = 'config.json'): ConvNextV2Config {
  const r = Schema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    return fail(file, issue.path.join('.') || '(root)', issue.message);
  }
  const c = r.data;
  if (c.hidden_sizes.length !== c.num_stages) fail(file, 'hidden_sizes', `has ${c.hidden_sizes.length} entries, num_stages is ${c.num_stages}`);
  if (c.depths.length !== c.num_stages) fail(file, 'depths', `has ${c.depths.length} entries, num_stages is ${c.num_stages}`);
  // stem (patch_size) then a stride-2 downsampling before every later stage
  const stride = c.patch_size * 2 ** (c.num_stages - 1);
  if (c.image_size % stride !== 0) fail(file, 'image_size', `${c.image_size} must be a multiple of patch_size x 2^(num_stages - 1) = ${stride}`);
  let id2label: string[] | null = null;
  if (c.id2label && Object.keys(c.id2label).length) {
    const n = Object.keys(c.id2label).length;
    id2label = Array.from({ length: n }, (_, i) => c.id2label![String(i)] ?? fail(file, 'id2label', `has ${n} labels but no key "${i}"`));
  }
  const numLabels = id2label?.length ?? c.num_labels ?? 2;
  if (id2label && c.num_labels !== undefined && c.num_labels !== id2label.length) fail(file, 'num_labels', `is ${c.num_labels}, id2label has ${id2label.length} labels`);
  const dt = c.dtype ?? c.torch_dtype;
  return {
    numChannels: c.num_channels,
    patchSize: c.patch_size,
    numStages: c.num_stages,
    hiddenSizes: c.hidden_sizes,
    depths: c.depths,
    hiddenAct: c.hidden_act,
    layerNormEps: c.layer_norm_eps,
    imageSize: c.image_size,
    numLabels,
    id2label,
    dtype: dt ? DTYPES[dt]! : null,
    initializerGain: c.initializer_gain,
  };
}

/** facebook/convnextv2-base-22k-384: ImageNet-22k pre-trained, ImageNet-1k fine-tuned at 384 x 384 (bf16 here). */
export const CONVNEXTV2_BASE_384 = parseConvNextV2Config({ hidden_sizes: [128, 256, 512, 1024], depths: [3, 3, 27, 3], image_size: 384, num_labels: 1000, torch_dtype: 'bfloat16' });

/** A tiny ConvNeXt-V2 (the CI cases and the fixture): two stages of widths 8 and 16, 32 x 32 inputs, 5 labels. */
export function tinyConvNextV2Config(over: Partial<ConvNextV2Config> = {}): ConvNextV2Config {
  return { ...parseConvNextV2Config({ num_stages: 2, hidden_sizes: [8, 16], depths: [2, 1], image_size: 32, num_labels: 5, torch_dtype: 'float32' }), ...over };
}
