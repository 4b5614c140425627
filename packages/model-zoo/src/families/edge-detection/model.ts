/**
 * YOLOv10's entry in the model registry: a config.json naming YOLOv10ForObjectDetection (or model_type yolov10) ->
 * parseYOLOv10Config, the L4/yolov10 tree (built through the module registry, so candidates apply), ultralytics'
 * checkpoint names (weights.ts), the vision runner. There is no token geometry: the engine fields are zero.
 */
import type { ModelArchitecture } from '../../models/registry.js';
import { parseYOLOv10Config, type YOLOv10Config } from './config.js';
import { FAMILY } from './family.js';
import type { YOLOv10ForObjectDetection } from './L4/yolov10.js';
import { yolov10WeightRules } from './weights.js';

export const yolov10Architecture: ModelArchitecture<YOLOv10Config> = {
  name: 'yolov10',
  family: FAMILY,
  architectures: ['YOLOv10ForObjectDetection'],
  modelTypes: ['yolov10'],
  runner: 'vision',
  parseConfig: parseYOLOv10Config,
  dtype: (c) => c.dtype,
  geometry: () => ({ vocabSize: 0, maxPositionEmbeddings: 0, numHiddenLayers: 0, numAttentionHeads: 0, numKeyValueHeads: 0, headDim: 0, hiddenSize: 0, intermediateSize: 0 }),
  build: (ctx, c) => ctx.registry.createIn<YOLOv10ForObjectDetection>(ctx, 'L4/yolov10', c),
  weightRules: yolov10WeightRules,
  describe: (c) => `yolov10${c.scale} detector (width ${c.widthMultiple}, depth ${c.depthMultiple}), ${c.nc} classes at ${c.imgsz} x ${c.imgsz}, max_det ${c.maxDet}`,
};
