/**
 * YOLOv10 checkpoints in ultralytics' names: the DetectionModel is one flat nn.Sequential `model`, so its tensors are
 * model.<layer>.* (model.0.conv.weight, model.2.m.0.cv1.bn.running_mean, model.23.one2one_cv2.0.2.bias). The tree here
 * groups the layers into the backbone / neck / head tasks (backbone.<i>, neck.<i>, head.*): renames map the groups back
 * onto the flat indices. ultralytics' checkpoints also hold the one-to-many head (model.23.cv2 / cv3, training only:
 * fuse() drops it) and the DFL's fixed arange (built by the module): both are read past.
 */
import { layerWeightRules } from '../../layers/weight-rules.js';
import type { WeightRules } from '../../weights/weight-plan.js';
import type { YOLOv10Config } from './config.js';
import { DETECT_INDEX } from './graph.js';

export function yolov10WeightRules(config: YOLOv10Config): WeightRules {
  return layerWeightRules(`the yolov10${config.scale} config`, undefined, {
    initStd: config.initializerRange ?? 0,
    ...(config.initializerRange === null ? { init: { mode: 'fan-in' as const, gain: config.initializerGain } } : {}),
    // BatchNorm weights and running variances are drawn around 1 (by checkpoint name: the renames come first)
    norms: /\.bn\.(weight|running_var)$/,
    renames: [
      { from: /^(backbone|neck)\./, to: 'model.' },
      { from: /^head\./, to: `model.${DETECT_INDEX}.` },
    ],
    computed: [/^head\.dfl\.conv\.weight$/],
    ignore: [new RegExp(`^model\\.${DETECT_INDEX}\\.(cv2|cv3)\\.`), new RegExp(`^model\\.${DETECT_INDEX}\\.dfl\\.conv\\.weight$`)],
  });
}
