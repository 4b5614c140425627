/**
 * The profiler on a synthetic registry whose modules spend known times: on a virtual clock (a backend whose timer
 * reads it; the modules advance it), so the top row, its share, self = inclusive less the children and the sum of
 * the self times and the unattributed rest are exact; and once on the CPU backend's real clock (busy-waiting, loose
 * bounds: other processes share the cores). --by-shape splits a task by its inputs; only forwards inside profile()
 * are recorded.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Module, ModuleRegistry, Tensor, defineTask, type Backend, type TaskBehaviour, type TaskDefinition, type Timer } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { HeadStart } from './head-start.js';
import { ModuleProfiler, shapeSignature, weightSignature } from './profiler.js';

/** The virtual clock, in ms; the fake backend's timers read it. */
let virtualNow = 0;
let realClock = false;

/** Spend `ms`: advance the virtual clock, or spin on the host clock (the CPU backend's timer is the host clock). */
function burn(ms: number): void {
  if (!realClock) {
    virtualNow += ms;
    return;
  }
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy
  }
}

/** What the profiler needs of a backend (a timer and synchronize), on the virtual clock. */
function virtualBackend(): Backend {
  const timer = (): Timer => {
    let t0 = 0;
    let t1 = 0;
    return { start: () => void (t0 = virtualNow), stop: () => void (t1 = virtualNow), elapsedMs: () => t1 - t0 };
  };
  return { name: 'virtual', synchronize: () => {}, createTimer: timer } as unknown as Backend;
}

class Leaf extends Module {
  constructor(readonly ms: number) {
    super();
  }
  forward(x?: Tensor): number {
    burn(this.ms);
    return x?.numel ?? 0;
  }
}

/** Burns 3 ms itself, then runs a fast and a slow leaf. */
class Block extends Module {
  readonly fast: Leaf;
  readonly slow: Leaf;
  readonly scale: Tensor;
  constructor(fastMs: number, slowMs: number) {
    super();
    this.scale = this.parameter('scale', [3], 'f32');
    this.fast = this.createModule<Leaf>('fast', 'L1/fast', fastMs);
    this.slow = this.createModule<Leaf>('slow', 'L1/slow', slowMs);
  }
  forward(x?: Tensor): number {
    burn(3);
    return this.fast.forward(x) + this.slow.forward(x);
  }
}

class Net extends Module {
  readonly blocks: Block[];
  constructor() {
    super();
    this.blocks = [0, 1].map((i) => this.createModule<Block>(`blocks.${i}`, 'L2/block', 1, 6));
  }
  forward(x?: Tensor): number {
    return this.blocks.reduce((a, b) => a + b.forward(x), 0);
  }
}

function task(id: string, level: number, baseline: TaskBehaviour['baseline']): TaskDefinition {
  return defineTask(
    {
      id, level, className: baseline.name, family: ['test'], architectures: ['Toy'], mirrors: `toy.${baseline.name}`, description: 'toy',
      init: [], inputs: [], outputs: [{ name: 'y', dtype: 'act', shape: ['N'] }],
      cases: { ci: [{ name: 'c', dtype: 'f32', dims: { N: 4 }, init: [] }], production: [{ name: 'p', dtype: 'f32', dims: { N: 4 }, init: [] }] },
    },
    { baseline, makeInputs: () => [], reference: () => [], work: () => ({ bytes: 0, flops: 0 }) },
  );
}

function setup(byShape = false, backend: Backend = virtualBackend()) {
  realClock = backend.name === 'cpu';
  const base = new ModuleRegistry();
  base.registerTask(task('L1/fast', 1, Leaf));
  base.registerTask(task('L1/slow', 1, Leaf));
  base.registerTask(task('L2/block', 2, Block));
  base.registerTask(task('L3/net', 3, Net));
  const profiler = new ModuleProfiler(base, { backend, device: 0 }, { byShape });
  const net = profiler.registry.createIn<Net>({ backend: new CpuBackend(), device: 0, dtype: 'f32', registry: profiler.registry }, 'L3/net');
  return { backend, profiler, net };
}

describe('ModuleProfiler', () => {
  it('the slow leaf is the top row with its exact share; self = inclusive less children; the rows and the rest sum to the forward', () => {
    const { profiler, net } = setup();
    for (let i = 0; i < 3; i++) expect(profiler.profile(() => void (burn(2), net.forward()))).toBe(22);
    const p = profiler.result();
    // per forward: 2 x 6 ms slow, 2 x 1 ms fast, 2 x 3 ms in the blocks themselves, nothing in the net, 2 ms outside it
    expect(p).toMatchObject({ forwards: 3, forwardMs: 22, unattributedMs: 2 });
    expect(p.tasks.map((t) => [t.task, t.calls, t.inclusiveMs, t.selfMs])).toEqual([
      ['L1/slow', 2, 12, 12],
      ['L2/block', 2, 20, 6],
      ['L1/fast', 2, 2, 2],
      ['L3/net', 1, 20, 0],
    ]);
    expect(p.tasks[0]!.selfMs / p.forwardMs).toBeCloseTo(12 / 22, 12);
    expect(p.tasks.reduce((a, t) => a + t.selfMs, 0) + p.unattributedMs).toBe(p.forwardMs);
  });

  it("on the CPU backend's clock: at least the burnt times, and the self times sum to the forward", () => {
    const { profiler, net } = setup(false, new CpuBackend());
    profiler.profile(() => void (burn(2), net.forward()));
    const p = profiler.result();
    expect(p.tasks.find((t) => t.task === 'L1/slow')!.selfMs).toBeGreaterThanOrEqual(12);
    expect(p.tasks.find((t) => t.task === 'L2/block')!.selfMs).toBeGreaterThanOrEqual(6);
    expect(p.forwardMs).toBeGreaterThanOrEqual(22);
    for (const t of p.tasks) expect(t.inclusiveMs).toBeGreaterThanOrEqual(t.selfMs);
    expect(p.tasks.reduce((a, t) => a + t.selfMs, 0) + p.unattributedMs).toBeCloseTo(p.forwardMs, 9);
  });

  it('forwards outside profile() are not recorded; --by-shape splits a task by its input shapes', () => {
    const backend = new CpuBackend();
    const { profiler, net } = setup(true);
    net.forward(); // not profiling: passes through
    expect(profiler.result()).toMatchObject({ forwards: 0, tasks: [] });
    const a = Tensor.zeros(backend, [2, 3], 'f32');
    const b = Tensor.zeros(backend, [4], 'f32');
    profiler.profile(() => {
      net.forward(a);
      net.forward(b);
    });
    const slow = profiler.result().tasks.filter((t) => t.task === 'L1/slow');
    expect(slow.map((t) => [t.shape, t.calls]).sort()).toEqual([['2x3', 2], ['4', 2]]);
    // a module with a weight of its own adds its shape: the same input, another layer
    const block = profiler.result().tasks.filter((t) => t.task === 'L2/block');
    expect(block.map((t) => t.shape).sort()).toEqual(['2x3 | w 3', '4 | w 3']);
    a.dispose();
    b.dispose();
  });

  it('shapeSignature names the tensors among the arguments; weightSignature a module\'s own weight', () => {
    const backend = new CpuBackend();
    const x = Tensor.zeros(backend, [2, 8, 4, 4], 'f32');
    expect(shapeSignature([x, 3, 'same', x])).toBe('2x8x4x4, 2x8x4x4');
    expect(shapeSignature([1, 2])).toBe('-');
    const cl = x.permute(0, 2, 3, 1).contiguous();
    const xcl = cl.permute(0, 3, 1, 2);
    expect(shapeSignature([xcl, x])).toBe('2x8x4x4 cl, 2x8x4x4'); // channels-last marked: which convs run NHWC
    for (const t of [cl, xcl]) t.dispose();
    const { net } = setup();
    expect(weightSignature(net)).toBe(''); // its parameters are its blocks'
    expect(weightSignature(net.blocks[0]!)).toBe('w 3');
    x.dispose();
  });

  it('a forward that throws leaves the profiler usable', () => {
    const { profiler, net } = setup();
    expect(() => profiler.profile(() => {
      throw new Error('boom');
    })).toThrow('boom');
    profiler.profile(() => void net.forward());
    expect(profiler.result().forwards).toBe(1);
  });

  it('profile(forward, around): the timed launch runs inside `around` (a head start queues work before it, untimed)', () => {
    const { profiler, net } = setup();
    let arounds = 0;
    const ms = profiler.profile(() => void net.forward(), (launch) => {
      arounds++;
      burn(5); // queued ahead: not part of the forward
      launch();
    });
    expect(arounds).toBe(1);
    expect(ms).toBe(20);
    expect(profiler.result()).toMatchObject({ forwardMs: 20, unattributedMs: 0 });
  });
});

describe('HeadStart (CPU backend: every op runs before it returns, so it never holds)', () => {
  it('calibrates to a count of matmuls, launches the forward once behind them, and reports whether it held', () => {
    const backend = new CpuBackend();
    const hs = new HeadStart(backend, 0, 48);
    hs.calibrate(2);
    expect(hs.leadMs).toBeGreaterThan(0);
    let launches = 0;
    const r = hs.run(() => void launches++);
    expect(launches).toBe(1);
    expect(r.leadMs).toBeGreaterThan(0);
    expect(r.held).toBe(false);
    hs.dispose();
  });
});
