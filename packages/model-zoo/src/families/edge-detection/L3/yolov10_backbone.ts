import { Module, defineTask, type Tensor } from '@fastkernels/core';
import { randn } from '../../../common/inputs.js';
import { initYOLOParameters, itemsizeOf } from '../cases.js';
import type { YOLOv10Config } from '../config.js';
import { FAMILY } from '../family.js';
import { BACKBONE_OUTPUTS, yolov10Layers, type LayerSpec } from '../graph.js';
import { graphCases, graphFlops } from '../graph-cases.js';
import { refBackbone } from '../reference.js';
import { buildGraphLayer, runGraphLayers } from './graph-layers.js';

/**
 * YOLOv10's backbone, layers 0-10 of yolov10{n,s,m}.yaml (ultralytics DetectionModel.model[0:11]): Conv stem, C2f
 * stages with Conv / SCDown downsampling, SPPF, PSA. forward(images [B, 3, S, S]) -> [P3 (layer 4), P4 (6), P5 (10)].
 * Children are named by graph index ('0'..'10').
 */
export class YOLOv10Backbone extends Module {
  readonly layers: (readonly [LayerSpec, Module & { forward(...x: Tensor[]): Tensor }])[];
  constructor(readonly config: YOLOv10Config) {
    super();
    this.layers = yolov10Layers(config)
      .slice(0, 11)
      .map((s) => [s, this.registerModule(String(s.index), buildGraphLayer(s))] as const);
  }

  forward(images: Tensor): [Tensor, Tensor, Tensor] {
    const [first, ...rest] = this.layers;
    const x0 = first![1].forward(images);
    const outs = runGraphLayers(rest, new Map([[0, x0]]), [...BACKBONE_OUTPUTS]);
    x0.dispose();
    return outs as [Tensor, Tensor, Tensor];
  }
}

export const yolov10BackboneTask = defineTask(
  {
    id: 'L3/yolov10_backbone',
    level: 3,
    className: 'YOLOv10Backbone',
    family: [FAMILY],
    architectures: ['yolov10'],
    mirrors: 'ultralytics.nn.tasks.DetectionModel', // its layers 0-10 (DetectionModel.model[0:11])
    description: 'YOLOv10 backbone (layers 0-10): stem, C2f / C2fCIB stages with Conv and SCDown downsampling, SPPF, PSA; returns P3, P4, P5.',
    init: [{ name: 'config', type: 'object', doc: 'YOLOv10Config (scale, width / depth multiples, nc)' }],
    inputs: [{ name: 'images', dtype: 'act', shape: ['B', 3, 'S', 'S'] }],
    outputs: [
      { name: 'p3', dtype: 'act', shape: ['B', 'C3', 'H3', 'W3'] },
      { name: 'p4', dtype: 'act', shape: ['B', 'C4', 'H4', 'W4'] },
      { name: 'p5', dtype: 'act', shape: ['B', 'C5', 'H5', 'W5'] },
    ],
    imports: ['L2/yolov10_conv', 'L2/yolov10_c2f', 'L2/yolov10_scdown', 'L2/yolov10_sppf', 'L2/yolov10_psa'],
    tolerance: { bf16: { atol: 0.1, rtol: 0.05 } },
    cases: graphCases,
  },
  {
    baseline: YOLOv10Backbone,
    makeInputs: (c, ctx, rng) => [randn(ctx, rng, [c.dims.B!, 3, c.dims.S!, c.dims.S!], c.dtype)],
    initParameters: (m, _c, rng) => initYOLOParameters(m, rng),
    reference: ([x], P, c) => refBackbone(yolov10Layers(c.init[0] as YOLOv10Config), x!, P),
    work: (c) => {
      const { B, S } = c.dims as Record<string, number>;
      return { bytes: itemsizeOf(c.dtype) * B! * 3 * S! * S! * 8, flops: graphFlops(c.init[0] as YOLOv10Config, S!, B!, 0, 10) };
    },
  },
);
