import { Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { initYOLOParameters, itemsizeOf } from '../cases.js';
import type { YOLOv10Config } from '../config.js';
import { FAMILY } from '../family.js';
import { graphCases, graphFlops } from '../graph-cases.js';
import { BACKBONE_OUTPUTS, NECK_OUTPUTS, yolov10Layers, type LayerSpec } from '../graph.js';
import { refNeck } from '../reference.js';
import { buildGraphLayer, runGraphLayers } from './graph-layers.js';

/**
 * YOLOv10's neck, layers 11-22 of yolov10{n,s,m}.yaml (the yaml's "head" section before v10Detect): a top-down path
 * (nearest x2 upsampling, Concat with P4 / P3, C2f) then a bottom-up path (Conv / SCDown stride 2, Concat, C2f /
 * C2fCIB). forward(p3, p4, p5) -> the detection head's inputs (layers 16, 19, 22). Children are named '11'..'22'.
 */
export class YOLOv10Neck extends Module {
  readonly layers: (readonly [LayerSpec, Module & { forward(...x: Tensor[]): Tensor }])[];
  constructor(readonly config: YOLOv10Config) {
    super();
    this.layers = yolov10Layers(config)
      .slice(11, 23)
      .map((s) => [s, this.registerModule(String(s.index), buildGraphLayer(s))] as const);
  }

  forward(p3: Tensor, p4: Tensor, p5: Tensor): [Tensor, Tensor, Tensor] {
    const given = new Map(BACKBONE_OUTPUTS.map((i, k) => [i, [p3, p4, p5][k]!] as const));
    return runGraphLayers(this.layers, given, [...NECK_OUTPUTS]) as [Tensor, Tensor, Tensor];
  }
}

export const yolov10NeckTask = defineTask(
  {
    id: 'L3/yolov10_neck',
    level: 3,
    className: 'YOLOv10Neck',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.tasks.DetectionModel', // its layers 11-22 (DetectionModel.model[11:23])
    description: 'YOLOv10 PAN neck (layers 11-22): upsample + concat + C2f top-down, strided Conv / SCDown + concat + C2f / C2fCIB bottom-up; the head inputs at P3 / P4 / P5.',
    init: [{ name: 'config', type: 'object', doc: 'YOLOv10Config (scale, width / depth multiples, nc)' }],
    inputs: [
      { name: 'p3', dtype: 'act', shape: ['B', 'C3', 'H3', 'W3'] },
      { name: 'p4', dtype: 'act', shape: ['B', 'C4', 'H4', 'W4'] },
      { name: 'p5', dtype: 'act', shape: ['B', 'C5', 'H5', 'W5'] },
    ],
    outputs: [
      { name: 'n3', dtype: 'act', shape: ['B', 'D3', 'H3', 'W3'] },
      { name: 'n4', dtype: 'act', shape: ['B', 'D4', 'H4', 'W4'] },
      { name: 'n5', dtype: 'act', shape: ['B', 'D5', 'H5', 'W5'] },
    ],
    imports: ['L1/interpolate', 'L2/yolov10_concat', 'L2/yolov10_c2f', 'L2/yolov10_conv', 'L2/yolov10_scdown'],
    tolerance: { bf16: { atol: 0.1, rtol: 0.05 } },
    cases: graphCases,
  },
  {
    baseline: YOLOv10Neck,
    makeInputs: (c, ctx, rng) => (['3', '4', '5'] as const).map((k) => randn(ctx, rng, [c.dims.B!, c.dims[`C${k}`]!, c.dims[`H${k}`]!, c.dims[`W${k}`]!], c.dtype)),
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: (xs, P, c) => refNeck(yolov10Layers(c.init[0] as YOLOv10Config), xs.map((x) => x!), P),
    work: (c) => {
      const d = c.dims as Record<string, number>;
      const maps = (['3', '4', '5'] as const).reduce((s, k) => s + d.B! * d[`H${k}`]! * d[`W${k}`]! * (d[`C${k}`]! + d[`D${k}`]!), 0);
      return { bytes: itemsizeOf(c.dtype) * maps * 3, flops: graphFlops(c.init[0] as YOLOv10Config, d.S!, d.B!, 11, 22) };
    },
  },
);
