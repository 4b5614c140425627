/**
 * YOLOv10's config.json. ultralytics describes a model by a yaml (yolov10{n,s,m}.yaml: a layer graph and a compound
 * scale [depth, width, max_channels]) and ships weights as pickled .pt files; a model folder here holds the fields
 * below next to model.safetensors in ultralytics' parameter names (model.0.conv.weight, ...):
 *
 *   architectures     ["YOLOv10ForObjectDetection"] (or model_type "yolov10")
 *   scale             "n" | "s" | "m": which yolov10 yaml (graph and default multipliers)          default "n"
 *   nc                number of classes                                                             default 80
 *   depth_multiple    repeats scale (ultralytics' depth); overrides the scale's                     optional
 *   width_multiple    channels scale (ultralytics' width); overrides the scale's                    optional
 *   max_channels      channel cap before the width scale; overrides the scale's                     optional
 *   max_det           detections kept by the NMS-free top-k postprocess                             default 300
 *   imgsz             square input size the model runs at (a multiple of 32)                         default 640
 *   torch_dtype       "float16" (production), "bfloat16" or "float32"                               optional
 *   names             class names: a list, or {"0": "person", ...} as ultralytics' model.names; nc of them optional
 *   initializer_range one std for every seeded random weight (init-weights; not ultralytics')         optional
 *   initializer_gain  without initializer_range, random weights are per fan-in: N(0, (gain / sqrt(fan_in))^2), BN
 *                     statistics calibrated on noise images (calibrate.ts; not ultralytics')     default 1
 */
import { UserError, type DType } from '@fastkernels/core';
import { z } from 'zod';

export type YOLOv10Scale = 'n' | 's' | 'm';

/** [depth, width, max_channels] of yolov10{n,s,m}.yaml. */
export const YOLOV10_SCALES: Readonly<Record<YOLOv10Scale, readonly [number, number, number]>> = {
  n: [0.33, 0.25, 1024],
  s: [0.33, 0.5, 1024],
  m: [0.67, 0.75, 768],
};

export interface YOLOv10Config {
  readonly scale: YOLOv10Scale;
  readonly nc: number;
  readonly depthMultiple: number;
  readonly widthMultiple: number;
  readonly maxChannels: number;
  readonly maxDet: number;
  readonly imgsz: number;
  readonly dtype: DType | null;
  /** One std for every random weight; null: per-fan-in init at initializerGain. */
  readonly initializerRange: number | null;
  readonly initializerGain: number;
  /** Class names by id (config.json's names), when it has them; ultralytics names a class by its id otherwise. */
  readonly names: readonly string[] | null;
}

/**
 * The default gain of per-fan-in init. Random YOLO models are BatchNorm-calibrated (calibrate.ts), which sets every
 * normalised layer to unit scale whatever the gain; it only scales the head's plain output convs, where 1 gives class
 * logits of about 0.6 std (scores mostly in 0.2-0.8).
 */
export const YOLO_INIT_GAIN = 1;

const DTYPES: Record<string, DType> = { float16: 'f16', bfloat16: 'bf16', float32: 'f32' };

const Schema = z.looseObject({
  scale: z.enum(['n', 's', 'm']).default('n'),
  nc: z.number().int().positive().default(80),
  depth_multiple: z.number().positive().max(4).optional(),
  width_multiple: z.number().positive().max(4).optional(),
  max_channels: z.number().int().positive().optional(),
  max_det: z.number().int().positive().default(300),
  imgsz: z.number().int().positive().multipleOf(32, 'must be a multiple of 32 (the P5 stride)').default(640),
  torch_dtype: z.enum(['float16', 'bfloat16', 'float32']).optional(),
  initializer_range: z.number().positive().max(1).optional(),
  initializer_gain: z.number().positive().max(10).default(YOLO_INIT_GAIN),
  names: z.union([z.array(z.string()), z.record(z.string(), z.string())]).optional(),
});

/** config.json's names (a list, or a dict keyed by class id as ultralytics' model.names) as a list of nc names. */
function classNames(names: readonly string[] | Record<string, string> | undefined, nc: number, file: string): string[] | null {
  if (names === undefined) return null;
  const list = Array.isArray(names) ? [...names] : Array.from({ length: Object.keys(names).length }, (_, i) => (names as Record<string, string>)[String(i)]);
  const missing = list.findIndex((n) => n === undefined);
  if (missing >= 0) throw new UserError(`invalid field names in ${file}: no name for class ${missing} (keys must be 0 to ${list.length - 1})`, { field: 'names', fix: 'key the names by class id from 0, or give a list' });
  if (list.length !== nc) throw new UserError(`invalid field names in ${file}: ${list.length} names for nc ${nc} classes`, { field: 'names', fix: `give one name per class (${nc}), or drop names` });
  return list as string[];
}

/** Parse a YOLOv10 config.json; a UserError naming the file and the field otherwise. */
export function parseYOLOv10Config(raw: unknown, file = 'config.json'): YOLOv10Config {
  const r = Schema.safeParse(raw);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    const field = issue.path.join('.') || '(root)';
    throw new UserError(`invalid field ${field} in ${file}: ${issue.message}`, { field, fix: 'see the YOLOv10 config fields in packages/model-zoo/src/families/edge-detection/config.ts' });
  }
  const c = r.data;
  const [depth, width, maxCh] = YOLOV10_SCALES[c.scale];
  return {
    scale: c.scale,
    nc: c.nc,
    depthMultiple: c.depth_multiple ?? depth,
    widthMultiple: c.width_multiple ?? width,
    maxChannels: c.max_channels ?? maxCh,
    maxDet: c.max_det,
    imgsz: c.imgsz,
    dtype: c.torch_dtype ? DTYPES[c.torch_dtype]! : null,
    initializerRange: c.initializer_range ?? null,
    initializerGain: c.initializer_gain,
    names: classNames(c.names, c.nc, file),
  };
}

/** The released yolov10{n,s,m} configs (COCO, 640 x 640, fp16). */
export const YOLOV10N = parseYOLOv10Config({ scale: 'n', torch_dtype: 'float16' });
export const YOLOV10S = parseYOLOv10Config({ scale: 's', torch_dtype: 'float16' });
export const YOLOV10M = parseYOLOv10Config({ scale: 'm', torch_dtype: 'float16' });

/**
 * The smallest graph that keeps PSA's head count (hidden c // 64) at 1: yolov10n's layers at width 0.125, 4 classes,
 * 64 x 64 inputs (the CI cases and the tiny fixture).
 */
export function tinyYOLOv10Config(over: Partial<YOLOv10Config> = {}): YOLOv10Config {
  return { ...parseYOLOv10Config({ scale: 'n', width_multiple: 0.125, nc: 4, imgsz: 64, max_det: 20, torch_dtype: 'float32' }), ...over };
}
