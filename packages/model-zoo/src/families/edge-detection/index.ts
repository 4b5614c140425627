import type { TaskDefinition, TaskProvider } from '@fastkernels/core';
import { FAMILY } from './family.js';
import { yolov10AttentionTask } from './L2/yolov10_attention.js';
import { yolov10BottleneckTask } from './L2/yolov10_bottleneck.js';
import { yolov10C2fTask } from './L2/yolov10_c2f.js';
import { yolov10CibTask } from './L2/yolov10_cib.js';
import { yolov10ConcatTask } from './L2/yolov10_concat.js';
import { yolov10ConvTask } from './L2/yolov10_conv.js';
import { yolov10DflTask } from './L2/yolov10_dfl.js';
import { yolov10PsaTask } from './L2/yolov10_psa.js';
import { yolov10RepvggdwTask } from './L2/yolov10_repvggdw.js';
import { yolov10ScdownTask } from './L2/yolov10_scdown.js';
import { yolov10SppfTask } from './L2/yolov10_sppf.js';
import { yolov10BackboneTask } from './L3/yolov10_backbone.js';
import { yolov10HeadTask } from './L3/yolov10_head.js';
import { yolov10NeckTask } from './L3/yolov10_neck.js';
import { yolov10Task } from './L4/yolov10.js';
import { convnextv2BlockTask } from './L2/convnextv2_block.js';
import { convnextv2StageTask } from './L3/convnextv2_stage.js';
import { convnextv2Task } from './L4/convnextv2.js';

export { FAMILY as EDGE_DETECTION };
export * from './config.js';
export { yolov10Layers, type LayerSpec } from './graph.js';
export { foldBatchNorm } from './fuse.js';
export { YOLOConv, yolov10ConvTask } from './L2/yolov10_conv.js';
export { YOLOBottleneck, yolov10BottleneckTask } from './L2/yolov10_bottleneck.js';
export { YOLOC2f, YOLOC2fCIB, yolov10C2fTask } from './L2/yolov10_c2f.js';
export { YOLOCIB, yolov10CibTask } from './L2/yolov10_cib.js';
export { YOLOConcat, yolov10ConcatTask } from './L2/yolov10_concat.js';
export { YOLODFL, yolov10DflTask } from './L2/yolov10_dfl.js';
export { YOLOPSA, yolov10PsaTask } from './L2/yolov10_psa.js';
export { YOLOAttention, yolov10AttentionTask } from './L2/yolov10_attention.js';
export { YOLORepVGGDW, yolov10RepvggdwTask } from './L2/yolov10_repvggdw.js';
export { YOLOSCDown, yolov10ScdownTask } from './L2/yolov10_scdown.js';
export { YOLOSPPF, yolov10SppfTask } from './L2/yolov10_sppf.js';
export { YOLOv10Backbone, yolov10BackboneTask } from './L3/yolov10_backbone.js';
export { YOLOv10Neck, yolov10NeckTask } from './L3/yolov10_neck.js';
export { YOLOv10DetectHead, yolov10HeadTask } from './L3/yolov10_head.js';
export { v10Postprocess, type Detections } from './L3/postprocess.js';
export { YOLOv10ForObjectDetection, yolov10Task } from './L4/yolov10.js';
export * from './convnextv2/config.js';
export { ConvNeXtV2Layer, convnextv2BlockTask } from './L2/convnextv2_block.js';
export { ConvNeXtV2Stage, convnextv2StageTask } from './L3/convnextv2_stage.js';
export { ConvNextV2ForImageClassification, IMAGENET_MEAN, IMAGENET_STD, convnextv2Task } from './L4/convnextv2.js';
export { calibrateBatchNorm } from './calibrate.js';

/**
 * The family's own tasks (L2-L4); its L1 tasks (conv2d, batch_norm2d, max_pool2d, interpolate, sigmoid, silu, softmax,
 * tensor_ops; ConvNeXt-V2's grn, layer_norm2d, global_avg_pool2d, layer_norm, linear, gelu) are shared.
 */
export const edgeDetectionTasks: readonly TaskDefinition[] = [
  yolov10ConvTask,
  yolov10BottleneckTask,
  yolov10RepvggdwTask,
  yolov10CibTask,
  yolov10C2fTask,
  yolov10ConcatTask,
  yolov10DflTask,
  yolov10AttentionTask,
  yolov10PsaTask,
  yolov10ScdownTask,
  yolov10SppfTask,
  yolov10BackboneTask,
  yolov10NeckTask,
  yolov10HeadTask,
  yolov10Task,
  convnextv2BlockTask,
  convnextv2StageTask,
  convnextv2Task,
];

export const edgeDetectionProvider: TaskProvider = { family: FAMILY, tasks: () => edgeDetectionTasks };
