/**
 * The generic plan on a hand-made module tree: fused expert tensors (vLLM's FusedMoE w13_weight / w2_weight) filled from
 * per-expert checkpoint tensors, a rename, a column-parallel rank's slice planned from the whole tree and from the
 * rank's shard alike, and a plan that does not fill a parameter refused before anything is read.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Module, ModuleRegistry, withContext, type ExecutionContext } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { loadWeights } from './load-weights.js';
import { writeSafetensors } from './safetensors.js';
import { planWeights, type WeightRules } from './weight-plan.js';
import { withExpertParallel } from '../layers/parallel/expert-parallel.js';

const tmp = mkdtempSync(join(tmpdir(), 'fk-plan-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const E = 3;
const H = 4;
const I = 2;

class Experts extends Module {
  constructor(world = 1) {
    super();
    this.parameter('w13_weight', [E, 2 * I, H]);
    this.parameter('w2_weight', [E, H, I]);
    this.parameter('router.weight', [E, H]);
    this.parameter('up.weight', [6 / world, H]);
  }
  forward(): never {
    throw new Error('not run');
  }
}
class Tree extends Module {
  constructor(world = 1) {
    super();
    this.registerModule('model.layers.0.mlp.experts', new Experts(world));
  }
  forward(): never {
    throw new Error('not run');
  }
}

const rules: WeightRules = {
  label: 'test config',
  stacked: [
    { param: 'w13_weight', parts: ['gate_proj.weight', 'up_proj.weight'], layout: { kind: 'experts', numExperts: E, sizes: [I, I] } },
    { param: 'w2_weight', parts: ['down_proj.weight'], layout: { kind: 'experts', numExperts: E, sizes: [H] } },
  ],
  renames: [{ from: /\.router\./, to: '.gate.' }],
  sharded: [{ match: /\.up\.weight$/, kind: 'column' }],
  initStd: 0.02,
};

const ctx = (): ExecutionContext => ({ backend: cpuBackend(), device: 0, dtype: 'f32', registry: new ModuleRegistry() });
const build = (world = 1) => withContext(ctx(), () => new Tree(world));

describe('planWeights', () => {
  it('a fused expert tensor takes each expert part at its rows; renames apply', () => {
    const plan = planWeights(build(), rules, { rank: 0, world: 1 });
    const w13 = plan.filter((m) => m.target.endsWith('w13_weight')).map((m) => [m.hfName, m.rowOffset, m.shape]);
    expect(w13).toEqual([0, 1, 2].flatMap((e) => [
      [`model.layers.0.mlp.experts.${e}.gate_proj.weight`, e * 2 * I, [I, H]],
      [`model.layers.0.mlp.experts.${e}.up_proj.weight`, e * 2 * I + I, [I, H]],
    ]));
    expect(plan.find((m) => m.target.endsWith('w2_weight') && m.rowOffset === 2 * H)!.hfName).toBe('model.layers.0.mlp.experts.2.down_proj.weight');
    expect(plan.find((m) => m.target.endsWith('router.weight'))!.hfName).toBe('model.layers.0.mlp.experts.gate.weight');
  });

  it("a column-parallel rank's slice is the same planned from the whole tree or from its shard", () => {
    const dense = { ...rules, stacked: [] }; // expert tensors split over ranks only by expert parallelism (below)
    const fromFull = planWeights(build(1), dense, { rank: 1, world: 2 }, 'full').find((m) => m.target.endsWith('up.weight'));
    const fromShard = planWeights(build(2), dense, { rank: 1, world: 2 }).find((m) => m.target.endsWith('up.weight'));
    expect(() => planWeights(build(1), rules, { rank: 1, world: 2 }, 'full')).toThrow(/expert tensors are split over ranks only by expert parallelism \(--ep\)/);
    expect(fromFull).toEqual(fromShard);
    expect(fromShard).toMatchObject({ shape: [6, H], slice: { dim: 0, start: 3, length: 3 } });
  });

  it('expert parallelism: rank r reads only its experts, stacked from row 0 of its shard', () => {
    const plan = withExpertParallel(true, () => planWeights(build(), rules, { rank: 1, world: 3 }, 'full'));
    const w13 = plan.filter((m) => m.target.endsWith('w13_weight')).map((m) => [m.hfName, m.rowOffset, m.slice]);
    expect(w13).toEqual([
      ['model.layers.0.mlp.experts.1.gate_proj.weight', 0, undefined],
      ['model.layers.0.mlp.experts.1.up_proj.weight', I, undefined],
    ]);
    expect(plan.filter((m) => m.target.endsWith('w2_weight')).map((m) => m.hfName)).toEqual(['model.layers.0.mlp.experts.1.down_proj.weight']);
  });
});

describe('loadWeights', () => {
  it('fills the fused expert tensors from per-expert checkpoint tensors', () => {
    const dir = join(tmp, 'experts');
    const plan = planWeights(build(), rules, { rank: 0, world: 1 });
    // every checkpoint tensor holds its own name's index + element / 100, so a misplaced piece shows
    const names = [...new Set(plan.map((m) => m.hfName))];
    const values = (name: string, n: number) => Float32Array.from({ length: n }, (_, i) => names.indexOf(name) + i / 100);
    mkdirSync(dir, { recursive: true });
    writeSafetensors(join(dir, 'model.safetensors'), plan.filter((m, i) => plan.findIndex((o) => o.hfName === m.hfName) === i).map((m) => ({
      name: m.hfName, dtype: 'f32' as const, shape: m.shape, bytes: () => new Uint8Array(values(m.hfName, m.shape.reduce((a, b) => a * b, 1)).buffer),
    })));
    const tree = build();
    loadWeights(tree, rules, dir, { rank: 0, world: 1 });
    const p = new Map(tree.namedParameters());
    const w13 = p.get('model.layers.0.mlp.experts.w13_weight')!;
    const up1 = w13.narrow(0, 1, 1).view([2 * I, H]).narrow(0, I, I);
    expect([...up1.toFloat64Array()].map((x) => Math.round(x * 100) / 100)).toEqual([...values('model.layers.0.mlp.experts.1.up_proj.weight', I * H)].map((x) => Math.round(x * 100) / 100));
    const w2 = p.get('model.layers.0.mlp.experts.w2_weight')!;
    expect(w2.narrow(0, 2, 1).toFloat64Array()[0]).toBeCloseTo(names.indexOf('model.layers.0.mlp.experts.2.down_proj.weight'), 5);
    tree.dispose();
  });

  it('a plan that does not fill a parameter is refused before the checkpoint is opened', () => {
    const partial: WeightRules = { ...rules, stacked: [{ param: 'w13_weight', parts: ['gate_proj.weight'], layout: { kind: 'experts', numExperts: E, sizes: [I] } }, rules.stacked![1]!] };
    const t = build();
    expect(() => loadWeights(t, partial, join(tmp, 'nowhere'), { rank: 0, world: 1 })).toThrow(/fills 24 of the 48 values of 'model.layers.0.mlp.experts.w13_weight' \[3, 4, 4\]/);
    t.dispose();
  });
});
