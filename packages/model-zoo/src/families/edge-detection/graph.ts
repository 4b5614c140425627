/**
 * YOLOv10's layer graph as ultralytics' parse_model reads yolov10{n,s,m}.yaml: per layer its inputs ("from"), its
 * module and the constructor arguments after the depth / width scaling (repeats max(round(n * depth), 1), channels
 * make_divisible(min(c, max_channels) * width, 8)). Layers 0-10 are the backbone, 11-22 the neck, 23 the head.
 */
import type { YOLOv10Config, YOLOv10Scale } from './config.js';

export type LayerModule = 'Conv' | 'C2f' | 'C2fCIB' | 'SCDown' | 'SPPF' | 'PSA' | 'Upsample' | 'Concat' | 'v10Detect';

export interface LayerSpec {
  readonly index: number;
  /** Absolute indices of the inputs (the yaml's -1 resolved). */
  readonly from: readonly number[];
  readonly module: LayerModule;
  /** The module's constructor arguments, as parse_model passes them (c1, c2, ... for the conv blocks). */
  readonly args: readonly unknown[];
  /** Output channels. */
  readonly c2: number;
}

type YamlRow = readonly [number | readonly number[], number, LayerModule, readonly unknown[]];

/** yolov10n.yaml; s and m differ only in which C2f layers are C2fCIB (and whether CIB uses the large kernel). */
function yaml(scale: YOLOv10Scale): YamlRow[] {
  const l8: YamlRow = scale === 'n' ? [-1, 3, 'C2f', [1024, true]] : scale === 's' ? [-1, 3, 'C2fCIB', [1024, true, true]] : [-1, 3, 'C2fCIB', [1024, true]];
  const l19: YamlRow = scale === 'm' ? [-1, 3, 'C2fCIB', [512, true]] : [-1, 3, 'C2f', [512]];
  const l22: YamlRow = scale === 'm' ? [-1, 3, 'C2fCIB', [1024, true]] : [-1, 3, 'C2fCIB', [1024, true, true]];
  return [
    [-1, 1, 'Conv', [64, 3, 2]], // 0-P1/2
    [-1, 1, 'Conv', [128, 3, 2]], // 1-P2/4
    [-1, 3, 'C2f', [128, true]],
    [-1, 1, 'Conv', [256, 3, 2]], // 3-P3/8
    [-1, 6, 'C2f', [256, true]],
    [-1, 1, 'SCDown', [512, 3, 2]], // 5-P4/16
    [-1, 6, 'C2f', [512, true]],
    [-1, 1, 'SCDown', [1024, 3, 2]], // 7-P5/32
    l8,
    [-1, 1, 'SPPF', [1024, 5]], // 9
    [-1, 1, 'PSA', [1024]], // 10
    [-1, 1, 'Upsample', [null, 2, 'nearest']],
    [[-1, 6], 1, 'Concat', [1]], // cat backbone P4
    [-1, 3, 'C2f', [512]], // 13
    [-1, 1, 'Upsample', [null, 2, 'nearest']],
    [[-1, 4], 1, 'Concat', [1]], // cat backbone P3
    [-1, 3, 'C2f', [256]], // 16 (P3/8-small)
    [-1, 1, 'Conv', [256, 3, 2]],
    [[-1, 13], 1, 'Concat', [1]], // cat head P4
    l19, // 19 (P4/16-medium)
    [-1, 1, 'SCDown', [512, 3, 2]],
    [[-1, 10], 1, 'Concat', [1]], // cat head P5
    l22, // 22 (P5/32-large)
    [[16, 19, 22], 1, 'v10Detect', ['nc']], // Detect(P3, P4, P5)
  ];
}

const makeDivisible = (x: number, d: number) => Math.ceil(x / d) * d;

/** parse_model over the scale's yaml: every layer with its resolved inputs, arguments and output channels. */
export function yolov10Layers(cfg: YOLOv10Config): LayerSpec[] {
  const ch: number[] = [];
  return yaml(cfg.scale).map(([f, n0, module, args], i) => {
    const from = (typeof f === 'number' ? [f] : [...f]).map((x) => (x < 0 ? i + x : x));
    const c1 = ch[from[0]!] ?? 3;
    const n = n0 > 1 ? Math.max(Math.round(n0 * cfg.depthMultiple), 1) : n0;
    let spec: Omit<LayerSpec, 'index' | 'from'>;
    if (module === 'Upsample') spec = { module, args, c2: c1 };
    else if (module === 'Concat') spec = { module, args, c2: from.reduce((a, x) => a + ch[x]!, 0) };
    else if (module === 'v10Detect') spec = { module, args: [cfg.nc, from.map((x) => ch[x]!)], c2: 0 };
    else {
      const c2 = makeDivisible(Math.min(args[0] as number, cfg.maxChannels) * cfg.widthMultiple, 8);
      const rest = args.slice(1);
      spec = { module, args: module === 'C2f' || module === 'C2fCIB' ? [c1, c2, n, ...rest] : [c1, c2, ...rest], c2 };
    }
    ch.push(spec.c2);
    return { index: i, from, ...spec };
  });
}

/** Layer indices of the backbone's outputs (P3, P4, P5) and of the neck's (the head's inputs). */
export const BACKBONE_OUTPUTS = [4, 6, 10] as const;
export const NECK_OUTPUTS = [16, 19, 22] as const;
/** ultralytics' Detect strides of P3 / P4 / P5. */
export const DETECT_STRIDES = [8, 16, 32] as const;
/** The Detect layer's index (its parameters are model.23.*). */
export const DETECT_INDEX = 23;
