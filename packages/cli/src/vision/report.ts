/**
 * What detect / classify write (--out) and print (--json): one JSON document per run, checked against these schemas
 * before it leaves the process, so a consumer can parse it with the same schema. Detections and predictions use
 * ultralytics' Results.summary() names (name, class, confidence, box x1 y1 x2 y2 in original-image pixels).
 */
import { z } from 'zod';

const count = z.number().int().nonnegative();
const seconds = z.number().nonnegative();
const probability = z.number().min(0).max(1);

/** The run around the results: model, backend, timings, and where it stopped when a file was bad. */
const run = {
  model: z.string(),
  architecture: z.string(),
  backend: z.string(),
  dtype: z.string(),
  weights: z.enum(['checkpoint', 'random', 'random-device']),
  image_size: z.number().int().positive(),
  batch: z.number().int().positive(),
  /** The file the run stopped at (unreadable or not an image); the images before it are in `images`. */
  error: z.strictObject({ file: z.string(), message: z.string() }).nullable(),
  timings: z.strictObject({
    /** Loading the weights and fusing. */
    load_s: seconds,
    /** The image loop: decoding, preprocessing, forwards, CUDA-graph captures. */
    total_s: seconds,
    images_per_s: z.number().nonnegative(),
    /** The forwards alone (upload, run or graph replay, read back), captures excluded. */
    forward_ms: seconds,
    forward_images_per_s: z.number().nonnegative(),
    graph_captures: count,
    graph_replays: count,
  }),
};

const image = { file: z.string(), width: z.number().int().positive(), height: z.number().int().positive() };

export const DetectionSchema = z.strictObject({
  name: z.string(),
  class: count,
  confidence: probability,
  box: z.strictObject({ x1: z.number().nonnegative(), y1: z.number().nonnegative(), x2: z.number().nonnegative(), y2: z.number().nonnegative() }),
});

export const DetectReportSchema = z.strictObject({
  schema_version: z.literal(1),
  task: z.literal('detect'),
  ...run,
  conf: probability,
  max_det: z.number().int().positive(),
  images: z.array(z.strictObject({ ...image, detections: z.array(DetectionSchema) })),
});

export const PredictionSchema = z.strictObject({ name: z.string(), class: count, confidence: probability });

export const ClassifyReportSchema = z.strictObject({
  schema_version: z.literal(1),
  task: z.literal('classify'),
  ...run,
  top: z.number().int().positive(),
  images: z.array(z.strictObject({ ...image, predictions: z.array(PredictionSchema) })),
});

export type Detection = z.infer<typeof DetectionSchema>;
export type DetectReport = z.infer<typeof DetectReportSchema>;
export type Prediction = z.infer<typeof PredictionSchema>;
export type ClassifyReport = z.infer<typeof ClassifyReportSchema>;
export type RunFields = Omit<DetectReport, 'schema_version' | 'task' | 'conf' | 'max_det' | 'images'>;
