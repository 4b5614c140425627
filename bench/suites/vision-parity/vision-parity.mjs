#!/usr/bin/env node
// Vision parity, our side (issues 33, 34): run our models on the input tensors vision_parity.py wrote and write the
// raw outputs, no image pre- or postprocessing in between. Per model folder WORK/<name>/ (config.json, ckpt/,
// inputs.safetensors):
//   yolov10n, yolov10s     loadVisionModel(ckpt) -> forward(pixel_values): the one-to-one head's decoded predictions
//                          [B, 4 + nc, A] before the NMS-free top-k (ckpt: `init-weights`, BatchNorms calibrated)
//   convnextv2_base        loadVisionModel(ckpt) -> forward(pixel_values): logits [B, 1000]
//   flux_transformer       FluxTransformer2DModel (FLUX.1-dev widths, the first few blocks): one step's velocity
//   flux_vae               AutoencoderKL (FLUX.1-dev's VAE): decode(latents)
// FLUX has no init-weights type of its own here: `--init` writes its seeded random checkpoints (bf16, diffusers'
// names) into WORK/<name>/ckpt with the same writer init-weights uses. Outputs: WORK/<name>/ours-<dtype>.safetensors
// (f32) and a line of JSON per model on stdout (shape, ms, or the error).
// Bundled by tools/gpu-host-bundle.mjs into bench/suites/vision-parity/vision-parity.mjs; on the GPU host:
//   dist/gpu-host/run-node bench/suites/vision-parity/vision-parity.mjs --work DIR --models a,b --dtype f32|bf16
//     [--backend cuda|cpu] [--init]
import '../../lib/user-errors.mjs'; // first: a bad FASTKERNELS_* value is one line, not a stack
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Tensor, withContext } from '@fastkernels/core';
import {
  AutoencoderKL, FluxTransformer2DModel, SafetensorsFile, baselineRegistry, fluxTransformerWeightRules, loadVisionModel, loadWeights,
  parseFluxConfig, parseVaeConfig, planWeights, vaeWeightRules, writeRandomCheckpoint, writeSafetensors,
} from '@fastkernels/model-zoo';
import { benchArgs, cudaBackendOrExit } from '../../lib/common.mjs';

const { opt, has } = benchArgs();
const work = opt('--work');
const models = (opt('--models') ?? '').split(',').filter(Boolean);
const dtype = opt('--dtype', 'f32');
const backendName = opt('--backend', 'cuda');
if (!work || !models.length || !['f32', 'bf16'].includes(dtype) || !['cuda', 'cpu'].includes(backendName)) {
  console.error('vision-parity.mjs: --work DIR --models a,b --dtype f32|bf16 [--backend cuda|cpu] [--init]');
  process.exit(1);
}
const backend = backendName === 'cuda' ? cudaBackendOrExit('vision-parity') : new CpuBackend();
const registry = baselineRegistry();
const readJson = (p) => JSON.parse(readFileSync(p, 'utf8'));

/** {name: Tensor} of a .safetensors file, on the backend, in `dt`. */
function readInputs(path, dt) {
  const f = SafetensorsFile.open(path);
  try {
    const out = {};
    for (const [name, e] of f.tensors) {
      const n = e.shape.reduce((a, b) => a * b, 1);
      const b = f.readBytes(name).slice();
      const v = new Float32Array(b.buffer, b.byteOffset, n);
      // as FluxPipeline feeds them: ids and timestep in the model's dtype, guidance in f32
      out[name] = Tensor.fromArray(backend, v, [...e.shape], name === 'guidance' ? 'f32' : dt);
    }
    return out;
  } finally {
    f.close();
  }
}

function writeOut(path, t) {
  const v = Float32Array.from(t.toFloat64Array());
  writeSafetensors(path, [{ name: 'out', dtype: 'f32', shape: [...t.shape], bytes: () => new Uint8Array(v.buffer) }]);
}

/** The FLUX component: its module, weight rules and config, built in ctx. */
function fluxComponent(name, dir) {
  const raw = readJson(join(dir, 'config.json'));
  if (name === 'flux_transformer') {
    const cfg = parseFluxConfig(raw, join(dir, 'config.json'));
    return { module: new FluxTransformer2DModel(cfg), rules: fluxTransformerWeightRules(cfg), raw };
  }
  const cfg = parseVaeConfig(raw, join(dir, 'config.json'));
  return { module: new AutoencoderKL(cfg), rules: vaeWeightRules(cfg), raw };
}

for (const name of models) {
  const dir = join(work, name);
  const ckpt = join(dir, 'ckpt');
  const t0 = performance.now();
  try {
    let out;
    if (name.startsWith('flux_')) {
      const ctx = { backend, device: 0, dtype, registry };
      out = withContext(ctx, () => {
        const { module, rules, raw } = fluxComponent(name, dir);
        if (has('--init') && !existsSync(join(ckpt, 'model.safetensors'))) {
          writeRandomCheckpoint(ckpt, raw, planWeights(module, rules), { seed: name === 'flux_vae' ? 2 : 1, dtype: 'bf16', std: rules.initStd, configPath: join(ckpt, 'config.json') });
        }
        loadWeights(module, rules, ckpt);
        const x = readInputs(join(dir, 'inputs.safetensors'), dtype);
        const y = name === 'flux_transformer'
          ? module.forward(x.hidden_states, x.encoder_hidden_states, x.pooled_projections, x.timestep, x.img_ids, x.txt_ids, x.guidance ?? null)
          : module.decode(x.latents);
        backend.synchronize(0);
        for (const t of Object.values(x)) t.dispose();
        module.dispose();
        return y;
      });
    } else {
      const loaded = loadVisionModel(ckpt, { backend, registry, dtype });
      out = withContext(loaded.ctx, () => {
        const x = readInputs(join(dir, 'inputs.safetensors'), dtype);
        const y = loaded.model.forward(x.pixel_values);
        backend.synchronize(0);
        x.pixel_values.dispose();
        return y;
      });
      loaded.model.dispose();
    }
    writeOut(join(dir, `ours-${dtype}.safetensors`), out);
    console.log(JSON.stringify({ model: name, dtype, backend: backendName, shape: [...out.shape], ms: Math.round(performance.now() - t0) }));
    out.dispose();
  } catch (e) {
    console.log(JSON.stringify({ model: name, dtype, backend: backendName, error: String(e?.stack ?? e).split('\n').slice(0, 6).join(' | ') }));
  }
}
