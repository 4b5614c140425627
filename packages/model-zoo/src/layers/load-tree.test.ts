/**
 * A tree of layers (Conv2d -> BatchNorm2d -> SiLU -> Linear, inside a named parent) saved to safetensors under its
 * parameter paths, as torch's state_dict would name them (plus BatchNorm's num_batches_tracked), and loaded back into
 * a fresh tree by the generic loader with no per-model code: same parameters, same output; a wrong checkpoint is
 * reported by name.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Module, ModuleRegistry, Rng, Tensor, UserError, withContext, type DType, type ExecutionContext } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { encodeValues } from '../weights/encode.js';
import { loadWeights } from '../weights/load-weights.js';
import { initWeightsRandom } from '../weights/random-init.js';
import { writeSafetensors, type WriteEntry } from '../weights/safetensors.js';
import { BatchNorm2d, Conv2d, Linear, SiLU, Sequential, createLayer, layerWeightRules, registerLayers } from './index.js';

const tmp = mkdtempSync(join(tmpdir(), 'fk-layer-tree-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

class Net extends Module {
  readonly features: Sequential;
  readonly head: Linear;
  constructor() {
    super();
    this.features = this.registerModule('features', new Sequential(createLayer('Conv2d', 3, 4, 3, 1, 1), createLayer('BatchNorm2d', 4), createLayer('SiLU')));
    this.head = this.registerModule('head', createLayer('Linear', 5, 6));
  }
  forward(x: Tensor): Tensor {
    const h = this.features.forward(x);
    try {
      return this.head.forward(h);
    } finally {
      h.dispose();
    }
  }
}

const build = (dtype: DType = 'f64'): Net => {
  const ctx: ExecutionContext = { backend: cpuBackend(), device: 0, dtype, registry: registerLayers(new ModuleRegistry()) };
  return withContext(ctx, () => new Net());
};

/** Write `values` (per parameter path) as one safetensors file in f32, with extra entries. */
function save(dir: string, values: Map<string, { shape: readonly number[]; data: Float64Array }>, extra: WriteEntry[] = []): void {
  const entries: WriteEntry[] = [...values].map(([name, v]) => ({ name, dtype: 'f32', shape: v.shape, bytes: () => encodeValues(v.data, 'f32') }));
  writeSafetensors(join(dir, 'model.safetensors'), [...entries, ...extra]);
}

describe('a tree of layers loads from safetensors by path', () => {
  const rng = new Rng(2024);
  const net = build();
  const values = new Map<string, { shape: readonly number[]; data: Float64Array }>();
  for (const [k, p] of net.namedParameters()) {
    const data = Float64Array.from(rng.fillNormal(p.numel, 0.5), (v) => Math.fround(k.endsWith('running_var') ? 0.5 + Math.abs(v) : v));
    values.set(k, { shape: p.shape, data });
    p.copy_(Tensor.fromArray(cpuBackend(), data, p.shape, 'f64'));
  }

  it('the paths are PyTorch state_dict names', () => {
    expect([...values.keys()]).toEqual([
      'features.0.weight', 'features.0.bias', 'features.1.weight', 'features.1.bias', 'features.1.running_mean', 'features.1.running_var', 'head.weight', 'head.bias',
    ]);
  });

  it('a fresh tree loaded (f32 file into f64 parameters) has the same parameters and output', () => {
    const dir = mkdtempSync(join(tmp, 'ok-'));
    const counter: WriteEntry = { name: 'features.1.num_batches_tracked', dtype: 'i64', shape: [], bytes: () => encodeValues(Float64Array.of(7), 'i64') };
    save(dir, values, [counter]);
    const fresh = build();
    loadWeights(fresh, layerWeightRules('test net'), dir);
    for (const [k, p] of fresh.namedParameters()) expect([...p.toFloat64Array()], k).toEqual([...values.get(k)!.data]);
    const x = Tensor.fromArray(cpuBackend(), rng.fillNormal(2 * 3 * 4 * 5), [2, 3, 4, 5], 'f64');
    const [a, b] = [net.forward(x), fresh.forward(x)];
    expect([...a.shape]).toEqual([2, 4, 4, 6]);
    expect([...b.toFloat64Array()]).toEqual([...a.toFloat64Array()]);
  });

  it('random init by the same rules draws norm weights and running_var around 1, the rest around 0', () => {
    const fresh = build();
    const rules = layerWeightRules('test net', fresh);
    expect(rules.norms?.source).toBe('^(features\\.1\\.weight|features\\.1\\.running_var)$');
    initWeightsRandom(fresh, rules, 3);
    const p = new Map(fresh.namedParameters());
    const mean = (k: string) => [...p.get(k)!.toFloat64Array()].reduce((a, v) => a + v, 0) / p.get(k)!.numel;
    expect(Math.abs(mean('features.1.weight') - 1)).toBeLessThan(0.1);
    expect(Math.abs(mean('features.1.running_var') - 1)).toBeLessThan(0.1);
    expect(Math.abs(mean('head.weight'))).toBeLessThan(0.1);
    expect(new Set(p.get('head.weight')!.toFloat64Array()).size).toBeGreaterThan(20);
  });

  it('missing, mis-shaped and unexpected tensors are listed by name in one UserError', () => {
    const dir = mkdtempSync(join(tmp, 'bad-'));
    const bad = new Map(values);
    bad.delete('head.bias');
    bad.set('features.0.weight', { shape: [4, 3, 3, 2], data: new Float64Array(72) });
    bad.set('features.9.weight', { shape: [1], data: new Float64Array(1) });
    save(dir, bad);
    let err: unknown;
    try {
      loadWeights(build(), layerWeightRules('test net'), dir);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UserError);
    const msg = (err as Error).message;
    expect(msg).toMatch(/does not match the test net \(3 problems\)/);
    expect(msg).toMatch(/tensor 'features.0.weight' in \S+model.safetensors has shape \[4, 3, 3, 2\], expected \[4, 3, 3, 3\]/);
    expect(msg).toContain("missing tensor 'head.bias' ([6], for head.bias)");
    expect(msg).toContain("unused by the model: 'features.9.weight'");
  });
});
