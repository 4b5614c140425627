/**
 * Building and running a range of YOLOv10's graph layers as ultralytics' DetectionModel does (_predict_once): each
 * layer takes the outputs its "from" names, outputs later layers need are kept and released after their last use.
 * Children are named by their graph index, so parameter paths are ultralytics' (model.<i>.*) under the owner.
 */
import { currentContext, type Module, type Tensor } from '@fastkernels/core';
import { YOLOC2fCIB } from '../L2/yolov10_c2f.js';
import type { LayerSpec } from '../graph.js';

type Layer = Module & { forward(...xs: Tensor[]): Tensor };

/** The module of one graph layer, built through the registry (C2fCIB, the c2f task's second class, with `new`). */
export function buildGraphLayer(spec: LayerSpec): Layer {
  const r = currentContext().registry;
  const a = spec.args;
  switch (spec.module) {
    case 'Conv':
      return r.create<Layer>('L2/yolov10_conv', ...a);
    case 'C2f':
      return r.create<Layer>('L2/yolov10_c2f', ...a);
    case 'C2fCIB':
      return new YOLOC2fCIB(a[0] as number, a[1] as number, a[2] as number, Boolean(a[3]), Boolean(a[4])) as unknown as Layer;
    case 'SCDown':
      return r.create<Layer>('L2/yolov10_scdown', ...a);
    case 'SPPF':
      return r.create<Layer>('L2/yolov10_sppf', ...a);
    case 'PSA':
      return r.create<Layer>('L2/yolov10_psa', ...a);
    case 'Upsample':
      return r.create<Layer>('L1/interpolate', ...a);
    case 'Concat':
      return r.create<Layer>('L2/yolov10_concat', ...a);
    default:
      throw new Error(`buildGraphLayer: ${spec.module} is built by the head`);
  }
}

/**
 * Run `layers` (graph order) given earlier outputs by index (owned by the caller); returns the outputs at `keep`
 * (owned by the caller) and releases every other intermediate after its last use.
 */
export function runGraphLayers(layers: readonly (readonly [LayerSpec, Layer])[], given: ReadonlyMap<number, Tensor>, keep: readonly number[]): Tensor[] {
  const lastUse = new Map<number, number>();
  for (const [s] of layers) for (const f of s.from) lastUse.set(f, s.index);
  const live = new Map<number, Tensor>();
  const get = (i: number) => live.get(i) ?? given.get(i)!;
  for (const [s, m] of layers) {
    live.set(s.index, m.forward(...s.from.map(get)));
    for (const f of s.from) if (lastUse.get(f) === s.index && live.has(f) && !keep.includes(f)) live.get(f)!.dispose(), live.delete(f);
  }
  const out = keep.map((i) => live.get(i)!);
  for (const [i, t] of live) if (!keep.includes(i)) t.dispose();
  return out;
}
