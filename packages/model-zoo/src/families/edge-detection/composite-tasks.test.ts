import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { describeCompositeContract } from '../../../test/composite-harness.js';
import { baselineRegistry } from '../../index.js';
import { edgeDetectionTasks } from './index.js';

describe('the family registers the YOLOv10 and ConvNeXt-V2 tasks', () => {
  it('has the original task ids at their levels', () => {
    const ids = baselineRegistry().allTasks().map((t) => t.id);
    const want = ['conv', 'bottleneck', 'c2f', 'cib', 'concat', 'dfl', 'psa', 'attention', 'repvggdw', 'scdown', 'sppf'].map((s) => `L2/yolov10_${s}`);
    for (const id of [...want, 'L3/yolov10_backbone', 'L3/yolov10_neck', 'L3/yolov10_head', 'L4/yolov10', 'L1/conv2d', 'L1/batch_norm2d', 'L1/max_pool2d', 'L1/interpolate', 'L1/sigmoid', 'L1/silu', 'L1/softmax', 'L1/tensor_ops']) expect(ids).toContain(id);
    for (const id of ['L1/grn', 'L1/layer_norm2d', 'L1/global_avg_pool2d', 'L2/convnextv2_block', 'L3/convnextv2_stage', 'L4/convnextv2']) expect(ids).toContain(id);
  });
});

for (const t of edgeDetectionTasks) describeCompositeContract(t, cpuBackend);
