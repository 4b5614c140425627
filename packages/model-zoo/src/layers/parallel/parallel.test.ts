import { CpuBackend } from '@fastkernels/backend-cpu';
import { ModuleRegistry, Rng, Tensor, TensorParallelGroup, currentTensorParallelGroup, qkvLayout, withTensorParallelGroup, compareTensors, toHostArray, toleranceFor, withContext, type ExecutionContext, type Module, type TaskDefinition } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import {
  AllReduce,
  ColumnParallelLinear,
  MergedColumnParallelLinear,
  QKVParallelLinear,
  RowParallelLinear,
  cat,
  mergeColumnParallel,
  mergeMergedColumn,
  mergeQkv,
  mergeRowParallel,
  shardColumnParallel,
  shardMergedColumn,
  shardQkv,
  shardRowParallel,
} from './index.js';
import { parallelLinearTasks, tensorParallelTasks } from '../../tasks/index.js';

const cpu = new CpuBackend();
const registry = new ModuleRegistry();
for (const t of tensorParallelTasks) registry.registerTask(t);
const ctx: ExecutionContext = { backend: cpu, device: 0, dtype: 'f32', registry };
const rng = new Rng(7);
const rand = (shape: number[]) => Tensor.fromArray(cpu, rng.fillNormal(shape.reduce((a, b) => a * b, 1), 1), shape, 'f32');
const arr = (t: Tensor) => [...t.toFloat64Array()];
const build = <M extends Module>(g: TensorParallelGroup, f: () => M): M => withTensorParallelGroup(g, () => withContext(ctx, f));
const single = TensorParallelGroup.single();

describe('parallel layers at world 1 equal the plain linear on the CPU backend', () => {
  const x = rand([5, 12]);
  const w = rand([8, 12]);
  const b = rand([8]);
  const plain = (weight: Tensor, bias: Tensor | null) => arr(cpu.ops.linear(x, weight, bias));

  it('ColumnParallelLinear (bias, skipBiasAdd, gatherOutput)', () => {
    expect(currentTensorParallelGroup().world).toBe(1);
    const m = build(single, () => new ColumnParallelLinear(12, 8, true, true));
    m.weightLoader('weight', w);
    m.weightLoader('bias', b);
    const [y, yb] = m.forward(x);
    expect(arr(y)).toEqual(plain(w, b));
    expect(yb).toBeNull();
    const s = build(single, () => new ColumnParallelLinear(12, 8, true, false, true));
    s.weightLoader('weight', w);
    s.weightLoader('bias', b);
    const [y2, b2] = s.forward(x);
    expect(arr(y2)).toEqual(plain(w, null));
    expect(arr(b2!)).toEqual(arr(b));
  });

  it('RowParallelLinear (bias added once, input split when not parallel)', () => {
    const m = build(single, () => new RowParallelLinear(12, 8, true, false));
    m.weightLoader('weight', w);
    m.weightLoader('bias', b);
    expect(arr(m.forward(x)[0])).toEqual(plain(w, b));
    expect(() => build(single, () => new RowParallelLinear(12, 8, true, true, false, null, false))).toThrow(/reduceResults is false/);
  });

  it('QKVParallelLinear from q/k/v parts equals the fused projection', () => {
    const [q, k, v] = [rand([8, 12]), rand([4, 12]), rand([4, 12])];
    const m = build(single, () => new QKVParallelLinear(12, 4, 2, 1, false));
    expect([m.numHeads, m.numKvHeads, m.numKvHeadReplicas, m.weight.shape[0]]).toEqual([2, 1, 1, 16]);
    m.weightLoader('weight', q, 'q');
    m.weightLoader('weight', k, 'k');
    m.weightLoader('weight', v, 'v');
    expect(arr(m.forward(x)[0])).toEqual(plain(cat([q, k, v]), null));
  });

  it('MergedColumnParallelLinear from its parts equals the merged projection', () => {
    const [g, u] = [rand([6, 12]), rand([6, 12])];
    const m = build(single, () => new MergedColumnParallelLinear(12, [6, 6], false));
    m.weightLoader('weight', g, 0);
    m.weightLoader('weight', u, 1);
    expect(arr(m.forward(x)[0])).toEqual(plain(cat([g, u]), null));
    expect(() => build(single, () => new MergedColumnParallelLinear(12, []))).toThrow(/outputSizes/);
  });

  it('AllReduce is a copy; allGather/split are identities', () => {
    const m = build(single, () => new AllReduce());
    const y = m.forward(x);
    expect(y).not.toBe(x);
    expect(arr(y)).toEqual(arr(x));
    expect(single.allGather(x)).toBe(x);
    expect(arr(single.split(x))).toEqual(arr(x));
  });
});

describe('sharding helpers split and merge exactly', () => {
  it('column / row / merged / qkv round trips for world 1, 2, 4', () => {
    const w = rand([16, 8]);
    for (const world of [1, 2, 4]) {
      const ranks = [...Array(world).keys()];
      expect(arr(mergeColumnParallel(ranks.map((r) => shardColumnParallel(w, r, world))))).toEqual(arr(w));
      expect(arr(mergeRowParallel(ranks.map((r) => shardRowParallel(w, r, world))))).toEqual(arr(w));
      expect(arr(mergeMergedColumn(ranks.map((r) => shardMergedColumn(w, [4, 12], r, world)), [4, 12]))).toEqual(arr(w));
    }
    // rows of part 0 (4 rows) and part 1 (12 rows) split separately: rank 1 of 2 = rows 2..3 then 10..15
    expect(arr(shardMergedColumn(w, [4, 12], 1, 2))).toEqual([...arr(w).slice(2 * 8, 4 * 8), ...arr(w).slice(10 * 8, 16 * 8)]);
    expect(() => shardColumnParallel(rand([6, 2]), 0, 4)).toThrow(/not divisible by the tensor-parallel size 4/);
  });

  it('qkv: heads split, kv heads replicated when fewer than ranks', () => {
    const d = 2;
    const w = rand([(4 + 2 * 2) * d, 3]); // 4 q heads, 2 kv heads
    const rows = (t: Tensor, from: number, n: number) => arr(t).slice(from * 3, (from + n) * 3);
    for (const world of [1, 2, 4]) {
      const layout = qkvLayout(d, 4, 2, world);
      const shards = [...Array(world).keys()].map((r) => shardQkv(w, layout, r));
      expect(arr(mergeQkv(shards, layout))).toEqual(arr(w));
    }
    const l4 = qkvLayout(d, 4, 2, 4);
    expect([l4.numHeads, l4.numKvHeads, l4.numKvHeadReplicas]).toEqual([1, 1, 2]);
    // rank 3 of 4: q head 3, kv group 1 (k head 1, v head 1)
    expect(arr(shardQkv(w, l4, 3))).toEqual([...rows(w, 3 * d, d), ...rows(w, (4 + 1) * d, d), ...rows(w, (4 + 2 + 1) * d, d)]);
    expect(() => qkvLayout(d, 4, 3, 2)).toThrow(/kv heads/);
  });
});

describe('parallel layers at world 2 and 4 (one process per rank simulated; no collectives)', () => {
  const x = rand([3, 16]);
  const w = rand([8, 16]);
  const full = arr(cpu.ops.linear(x, w, null));
  for (const world of [2, 4]) {
    const groups = [...Array(world).keys()].map((r) => new TensorParallelGroup(r, world));
    it(`column outputs concatenated = the full output (world ${world})`, () => {
      const outs = groups.map((g) => {
        const m = build(g, () => new ColumnParallelLinear(16, 8, false));
        m.weightLoader('weight', w);
        return m.forward(x)[0];
      });
      expect(arr(cat(outs, -1))).toEqual(full);
    });
    it(`row partial products summed = the full output (world ${world})`, () => {
      const outs = groups.map((g) => {
        const m = build(g, () => new RowParallelLinear(16, 8, false, false, false, null, false));
        m.weightLoader('weight', w);
        expect(m.weight.shape).toEqual([8, 16 / world]);
        return arr(m.forward(x)[0]);
      });
      const sum = outs[0]!.map((_, i) => outs.reduce((a, o) => a + o[i]!, 0));
      sum.forEach((v, i) => expect(v).toBeCloseTo(full[i]!, 5)); // f32 partials rounded before the sum
    });
    it(`collectives without a communicator fail clearly (world ${world})`, () => {
      expect(() => groups[0]!.allReduce_(x)).toThrow(/needs a communicator/);
    });
  }
});

describe('tasks at world 1 on the CPU backend match their float64 references', () => {
  for (const task of tensorParallelTasks as readonly TaskDefinition[]) {
    for (const c of task.cases.ci) {
      it(`${task.id} ${c.name}`, () => {
        const cctx: ExecutionContext = { ...ctx, dtype: c.dtype };
        const module = registry.createIn<Module>(cctx, task.id, ...c.init);
        const r = new Rng(11);
        task.initParameters?.(module, c, r);
        const inputs = withContext(cctx, () => task.makeInputs(c, cctx, r));
        const params = new Map(module.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
        const result = (module as unknown as { forward(...a: unknown[]): unknown }).forward(...inputs);
        const outs = task.collectOutputs ? task.collectOutputs(inputs, result) : [result as Tensor];
        const expected = task.reference(inputs.map((t) => (t ? toHostArray(t) : null)), params, c);
        expect(outs).toHaveLength(task.outputs.length);
        const cmp = compareTensors(outs[0]!, expected[0]!, toleranceFor(task, c.dtype));
        expect(cmp.status, JSON.stringify(cmp)).toBe('PASSED');
        expect(task.work(c).bytes).toBeGreaterThan(0);
      });
    }
  }
  it('the parallel linear tasks are rank-aware (bench --tp runs them in a process group)', () => {
    for (const t of parallelLinearTasks) expect([t.id, t.worldSize, t.rankAwareCases]).toEqual([t.id, 2, true]);
  });

  it("work counts are per rank: the ranks' FLOPs add up to the unsharded layer's (kv heads not replicated), each rank's bytes are fewer", () => {
    const workAt = (task: TaskDefinition, c: TaskDefinition['cases']['ci'][number], rank: number, world: number) =>
      withTensorParallelGroup(new TensorParallelGroup(rank, world), () => task.work(c));
    for (const task of parallelLinearTasks as readonly TaskDefinition[]) {
      for (const c of task.cases.ci) {
        const whole = task.work(c);
        for (const world of [2, 4]) {
          const ranks = [...Array(world).keys()].map((r) => workAt(task, c, r, world));
          const replicatedKv = task.id === 'L2/qkv_parallel_linear' && ((c.init[3] as number | null) ?? (c.init[2] as number)) < world;
          const flops = ranks.reduce((a, w) => a + w.flops, 0);
          if (replicatedKv) expect(flops, `${task.id} ${c.name} W=${world}`).toBeGreaterThan(whole.flops);
          else expect(flops, `${task.id} ${c.name} W=${world}`).toBe(whole.flops);
          for (const w of ranks) expect(w.bytes, `${task.id} ${c.name} W=${world}`).toBeLessThan(whole.bytes);
        }
      }
    }
    // ColumnParallelLinear small-f32 (T 5, K 64, N 48, bias) at W = 2: a [5, 64] x [24, 64] GEMM plus the bias
    const [col] = parallelLinearTasks;
    expect(workAt(col, col.cases.ci[0]!, 1, 2)).toEqual({ bytes: (5 * 64 + 24 * 64 + 24 + 5 * 24) * 4, flops: 2 * 5 * 24 * 64 + 5 * 24 });
  });

  it('RowParallelLinear resolves L1/allreduce through the registry only when it needs it (world > 1)', () => {
    expect(registry.task('L2/row_parallel_linear')?.imports).toEqual(['L1/allreduce']);
  });
});
