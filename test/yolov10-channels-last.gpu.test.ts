/**
 * YOLOv10's forward stays channels-last on CUDA (tag gpu; skipped without one): the tiny YOLOv10 (yolov10n's layers at
 * width 0.125, 64 x 64, f16; its config written here, the GPU host has the bundle, not the fixture folder) through the
 * vision runner's eager path with channels-last inputs and weights, every conv's input recorded: each one must have
 * channels-last strides (torch's suggest_memory_format) — through the backbone, the neck's nearest upsample and concats
 * (interpolate keeps channels-last since issue 34's follow-up) and the head — except where PyTorch's own channels-last
 * model feeds NCHW (PSA attention's pe / proj, the DFL conv) — so no conv copies its input to NHWC where torch does not, and
 * no copy but the RGB input's runs the generic strided kernel. Runs with `dist/gpu-host/run-gpu-tests yolov10-channels-last`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CudaBackend, CudaRuntime, type CudaOps } from '@fastkernels/backend-cuda';
import { Rng, stridesLikeChannelsLast, type Tensor } from '@fastkernels/core';
import { VisionRunner, baselineRegistry, loadVisionModel } from '@fastkernels/model-zoo';
import { afterAll, describe, expect, it } from 'vitest';

const G = { tags: ['gpu'], timeout: 300_000 };
const needGpu = () => {
  if (!(CudaRuntime.probe().deviceCount ?? 0)) throw new Error('this test needs a GPU');
};

/** The calling frames' function names, innermost first (the bundled tests have no package paths): where in the model. */
function modelSite(stack: string): string {
  const frames = stack.split('\n').slice(1).map((l) => /^\s*at (\S+) \(/.exec(l)?.[1]).filter((f): f is string => !!f && !/^(Object\.|Array\.|new |Module\.)|conv\.run/.test(f));
  return frames.join(' < ') || '?';
}

const dir = mkdtempSync(join(tmpdir(), 'fk-y10-cl-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('YOLOv10 on CUDA stays channels-last', () => {
  it('every conv input of a forward has channels-last strides (backbone, neck upsample + concat, head)', G, () => {
    needGpu();
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ architectures: ['YOLOv10ForObjectDetection'], model_type: 'yolov10', scale: 'n', nc: 4, width_multiple: 0.125, max_det: 20, imgsz: 64, torch_dtype: 'float16' }));
    const backend = new CudaBackend();
    const loaded = loadVisionModel(dir, { backend, registry: baselineRegistry(), dtype: 'f16' });
    const runner = new VisionRunner(loaded.model, loaded.ctx, { maxBatch: 1, graphs: false, channelsLast: true });
    const conv = backend.generatedOps.conv;
    const ops = backend.ops as CudaOps;
    const seen: { shape: number[]; strides: number[]; site: string }[] = [];
    const generic: string[] = [];
    const run = conv.run.bind(conv);
    const copy = ops.copy.bind(ops);
    conv.run = (...a: Parameters<typeof run>) => {
      const x = a[2];
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 64; // the model's frames sit below the registry's (10 by default would cut them)
      const stack = new Error().stack ?? '';
      Error.stackTraceLimit = limit;
      seen.push({ shape: [...x.shape], strides: [...x.strides], site: modelSite(stack) });
      return run(...a);
    };
    ops.copy = (dst: Tensor, src: Tensor) => {
      ops.lastCopyPath = null;
      copy(dst, src);
      // the RGB input's NCHW -> NHWC (3 channels: a thin transpose) is the one generic copy expected
      if (ops.lastCopyPath === 'generic' && !(dst.rank === 4 && dst.shape[1] === 3)) generic.push(`[${dst.shape}] from strides [${src.strides}]`);
    };
    try {
      const S = runner.imageSize;
      const image = Float32Array.from(new Rng(1).fillUniform(3 * S * S, 0, 1));
      runner.run([image]);
      backend.synchronize(0);
      expect(seen.length).toBeGreaterThan(20);
      // Where PyTorch's channels-last model feeds NCHW too (ultralytics' code, which the modules mirror): the attention's
      // pe (v.reshape of a strided split copies to contiguous) and proj (the view of a matmul's output, plus pe), and
      // the DFL conv (softmax over a transposed view returns contiguous). Every other conv input must be channels-last.
      const asTorch = (site: string) => /YOLOAttention\d*\.forward|YOLODFL\d*\.forward/.test(site);
      const off = seen.filter((s) => s.shape.length === 4 && s.shape[1]! > 1 && !stridesLikeChannelsLast(s.shape, s.strides) && !asTorch(s.site));
      expect(seen.filter((s) => asTorch(s.site)).length, 'the attention and DFL convs were seen (their names in the stack)').toBeGreaterThan(0);
      // one line each, with the functions that made the call (an array in the expectation prints truncated)
      const lines = off.map((s) => `[${s.shape}] strides [${s.strides}] at ${s.site.split(' < ').slice(0, 8).join(' < ')}`);
      expect(lines.length, `conv inputs off channels-last:\n${lines.join('\n')}`).toBe(0);
      expect(generic, 'strided copies on the generic kernel').toEqual([]);
    } finally {
      conv.run = run;
      ops.copy = copy;
      runner.dispose();
      loaded.model.dispose();
    }
  });
});
