import { describe, expect, it } from 'vitest';
import { currentContext, hasContext, withContext, type ExecutionContext } from './context.js';
import type { DType } from './dtype.js';
import { Module } from './module.js';
import { ModuleRegistry } from './registry.js';
import { defineTask, type TaskBehaviour, type TaskDefinition } from './task.js';
import { Tensor } from './tensor.js';
import { HostTestBackend } from './test-support/host-backend.js';

// --- a tiny two-level model -------------------------------------------------------------------

class Leaf extends Module {
  readonly weight: Tensor;
  constructor(readonly n: number) {
    super();
    this.weight = this.parameter('weight', [n]);
  }
  forward(): string {
    return 'leaf';
  }
}

class FastLeaf extends Leaf {
  override forward(): string {
    return 'fast-leaf';
  }
}

class Block extends Module {
  readonly leaf: Leaf;
  readonly bias: Tensor;
  constructor(n: number) {
    super();
    this.leaf = this.createModule<Leaf>('leaf', 'L1/leaf', n);
    this.bias = this.parameter('bias', [2], 'f32');
  }
  forward(): string {
    return `block(${this.leaf.forward()})`;
  }
}

class FastBlock extends Block {
  override forward(): string {
    return `fast-block(${this.leaf.forward()})`;
  }
}

/** Two blocks and a registered (not built through the registry) leaf. */
class Net extends Module {
  readonly blocks: Block[];
  constructor(n: number) {
    super();
    this.blocks = [0, 1].map((i) => this.createModule<Block>(`blocks.${i}`, 'L2/block', n));
    this.registerModule('head', new Leaf(1));
    this.registerParameter('scale', Tensor.fromArray(this.ctx.backend, [1], [1], 'f64'));
  }
  forward(): string {
    return this.blocks.map((b) => b.forward()).join(' ');
  }
}

function task(id: string, level: number, className: string, baseline: TaskBehaviour['baseline']): TaskDefinition {
  return defineTask(
    {
      id, level, className, family: ['test'], architectures: ['Toy'], mirrors: 'toy.layers.' + className, description: 'toy',
      init: [{ name: 'n', type: 'int' }], inputs: [], outputs: [{ name: 'y', dtype: 'act', shape: ['N'] }],
      cases: { ci: [{ name: 'c', dtype: 'f32', dims: { N: 4 }, init: [4] }], production: [{ name: 'p', dtype: 'f32', dims: { N: 4 }, init: [4] }] },
    },
    { baseline, makeInputs: () => [], reference: () => [], work: () => ({ bytes: 0, flops: 0 }) },
  );
}

function setup() {
  const backend = new HostTestBackend();
  const base = new ModuleRegistry();
  base.registerTask(task('L1/leaf', 1, 'Leaf', Leaf));
  base.registerTask(task('L2/block', 2, 'Block', Block));
  base.registerTask(task('L3/net', 3, 'Net', Net));
  const ctxFor = (registry: ModuleRegistry, dtype: DType = 'bf16'): ExecutionContext => ({ backend, device: 0, dtype, registry });
  return { backend, base, ctxFor };
}

describe('ModuleRegistry', () => {
  it('resolves baselines and builds submodules through the registry', () => {
    const { base, ctxFor } = setup();
    const b = base.createIn<Block>(ctxFor(base), 'L2/block', 3);
    expect(b).toBeInstanceOf(Block);
    expect(b.leaf).toBeInstanceOf(Leaf);
    expect(b.forward()).toBe('block(leaf)');
    expect(base.label).toBe('baseline');
  });

  it('a child override applies to modules created through it and to their submodules (late binding)', () => {
    const { base, ctxFor } = setup();
    const cand = base.child('candidate');
    cand.override('L1/leaf', FastLeaf);
    expect(cand.label).toBe('candidate');
    expect(cand.parent).toBe(base);
    const leaf = cand.createIn<Leaf>(ctxFor(cand), 'L1/leaf', 2);
    expect(leaf.forward()).toBe('fast-leaf');
    const net = cand.createIn<Net>(ctxFor(cand), 'L3/net', 2);
    expect(net.forward()).toBe('block(fast-leaf) block(fast-leaf)');
    // the parent is unchanged
    expect(base.resolve('L1/leaf')).toBe(Leaf);
    expect(base.createIn<Net>(ctxFor(base), 'L3/net', 2).forward()).toBe('block(leaf) block(leaf)');
  });

  it('overrides at two levels compose; grandchildren inherit and can override again', () => {
    const { base, ctxFor } = setup();
    const cand = base.child();
    cand.override('L1/leaf', FastLeaf);
    cand.override('L2/block', FastBlock);
    expect(cand.createIn<Net>(ctxFor(cand), 'L3/net', 2).forward()).toBe('fast-block(fast-leaf) fast-block(fast-leaf)');
    const only = base.child();
    only.override('L2/block', FastBlock);
    expect(only.createIn<Net>(ctxFor(only), 'L3/net', 2).forward()).toBe('fast-block(leaf) fast-block(leaf)');
    const grand = only.child('grand');
    expect(grand.createIn<Block>(ctxFor(grand), 'L2/block', 1).forward()).toBe('fast-block(leaf)');
    grand.override('L1/leaf', FastLeaf);
    expect(grand.createIn<Block>(ctxFor(grand), 'L2/block', 1).forward()).toBe('fast-block(fast-leaf)');
    expect(only.createIn<Block>(ctxFor(only), 'L2/block', 1).forward()).toBe('fast-block(leaf)');
  });

  it('create() through a child applies its overrides even inside a context naming another registry', () => {
    const { base, ctxFor } = setup();
    const cand = base.child();
    cand.override('L1/leaf', FastLeaf);
    const block = withContext(ctxFor(base), () => cand.create<Block>('L2/block', 2));
    expect(block.forward()).toBe('block(fast-leaf)');
    // and the outer context is restored
    expect(hasContext()).toBe(false);
  });

  it('overrides() / isOverridden()', () => {
    const { base } = setup();
    const cand = base.child();
    expect(cand.overrides()).toEqual([]);
    cand.override('L1/leaf', FastLeaf);
    expect(cand.overrides()).toEqual(['L1/leaf']);
    expect(cand.isOverridden('L1/leaf')).toBe(true);
    expect(cand.isOverridden('L2/block')).toBe(false);
    expect(base.overrides()).toEqual([]);
    expect(base.isOverridden('L1/leaf')).toBe(false);
  });

  it('unknown tasks and duplicate registrations fail clearly', () => {
    const { base, ctxFor } = setup();
    expect(() => base.resolve('L1/nope')).toThrow("unknown task 'L1/nope'");
    expect(() => base.child().resolve('L1/nope')).toThrow("unknown task 'L1/nope'");
    expect(() => base.createIn(ctxFor(base), 'L1/nope')).toThrow(/unknown task/);
    expect(() => base.child().override('L1/nope', Leaf)).toThrow("cannot override unknown task 'L1/nope'");
    expect(() => base.registerTask(task('L1/leaf', 1, 'Leaf', Leaf))).toThrow("task 'L1/leaf' registered twice");
    expect(base.task('L1/nope')).toBeUndefined();
  });

  it('task lookup falls back to the parent; allTasks sorts by level then id', () => {
    const { base } = setup();
    const child = base.child();
    expect(child.task('L2/block')?.className).toBe('Block');
    child.registerTask(task('L1/aaa', 1, 'Aaa', Leaf));
    expect(child.allTasks().map((t) => t.id)).toEqual(['L1/aaa', 'L1/leaf', 'L2/block', 'L3/net']);
    expect(base.allTasks().map((t) => t.id)).toEqual(['L1/leaf', 'L2/block', 'L3/net']);
    expect(base.task('L1/aaa')).toBeUndefined();
  });
});

describe('execution context', () => {
  it('currentContext outside withContext throws; modules need a context', () => {
    expect(hasContext()).toBe(false);
    expect(() => currentContext()).toThrow(/no execution context/);
    expect(() => new Leaf(2)).toThrow(/no execution context/);
  });

  it('withContext nests and unwinds on throw', () => {
    const { base, ctxFor } = setup();
    const a = ctxFor(base, 'f32');
    const b = ctxFor(base, 'f16');
    withContext(a, () => {
      expect(currentContext()).toBe(a);
      withContext(b, () => expect(currentContext()).toBe(b));
      expect(() => withContext(b, () => {
        throw new Error('boom');
      })).toThrow('boom');
      expect(currentContext()).toBe(a);
    });
    expect(hasContext()).toBe(false);
    expect(withContext(a, () => 42)).toBe(42);
  });
});

describe('Module parameters and state dicts', () => {
  it('parameters go to the context backend with its dtype unless given, zero-filled', () => {
    const { base, ctxFor, backend } = setup();
    const b = base.createIn<Block>(ctxFor(base, 'bf16'), 'L2/block', 3);
    expect(b.leaf.weight.dtype).toBe('bf16');
    expect(b.leaf.weight.backend).toBe(backend);
    expect(b.bias.dtype).toBe('f32');
    expect([...b.leaf.weight.toFloat64Array()]).toEqual([0, 0, 0]);
  });

  it('namedParameters: own first, then children with dotted prefixes', () => {
    const { base, ctxFor } = setup();
    const net = base.createIn<Net>(ctxFor(base), 'L3/net', 2);
    expect(net.namedParameters().map(([k]) => k)).toEqual([
      'scale', 'blocks.0.bias', 'blocks.0.leaf.weight', 'blocks.1.bias', 'blocks.1.leaf.weight', 'head.weight',
    ]);
    expect(net.namedParameters('model.')[0]![0]).toBe('model.scale');
    const sd = net.stateDict();
    expect(sd.get('blocks.1.leaf.weight')).toBe(net.blocks[1]!.leaf.weight);
  });

  it('loadStateDict copies values and converts dtype', () => {
    const { base, ctxFor, backend } = setup();
    const b = base.createIn<Block>(ctxFor(base, 'bf16'), 'L2/block', 3);
    const state = new Map([
      ['leaf.weight', Tensor.fromArray(backend, [0.1, 2, -3], [3], 'f64')],
      ['bias', Tensor.fromArray(backend, [5, 6], [2], 'f32')],
    ]);
    expect(b.loadStateDict(state, { strict: true })).toEqual({ missing: [], unexpected: [] });
    expect([...b.leaf.weight.toFloat64Array()]).toEqual([0.10009765625, 2, -3]);
    expect([...b.bias.toFloat64Array()]).toEqual([5, 6]);
    // the state tensors are copied, not adopted
    expect(b.leaf.weight.storage).not.toBe(state.get('leaf.weight')!.storage);
  });

  it('loadStateDict from another module\'s stateDict', () => {
    const { base, ctxFor } = setup();
    const a = base.createIn<Net>(ctxFor(base, 'f32'), 'L3/net', 2);
    a.blocks[0]!.leaf.weight.fill_(3);
    const b = base.createIn<Net>(ctxFor(base, 'f32'), 'L3/net', 2);
    b.loadStateDict(a.stateDict(), { strict: true });
    expect([...b.blocks[0]!.leaf.weight.toFloat64Array()]).toEqual([3, 3]);
  });

  it('strict loading lists missing and unexpected names', () => {
    const { base, ctxFor, backend } = setup();
    const b = base.createIn<Block>(ctxFor(base), 'L2/block', 3);
    const state = new Map([
      ['leaf.weight', Tensor.fromArray(backend, [1, 2, 3], [3], 'f32')],
      ['extra', Tensor.fromArray(backend, [1], [1], 'f32')],
    ]);
    expect(() => b.loadStateDict(state, { strict: true })).toThrow('loadStateDict: missing [bias], unexpected [extra]');
    // strict failure copies nothing
    expect([...b.leaf.weight.toFloat64Array()]).toEqual([0, 0, 0]);
  });

  it('non-strict loading copies what matches and reports the rest', () => {
    const { base, ctxFor, backend } = setup();
    const b = base.createIn<Block>(ctxFor(base), 'L2/block', 3);
    const state = new Map([
      ['leaf.weight', Tensor.fromArray(backend, [1, 2, 3], [3], 'f32')],
      ['extra', Tensor.fromArray(backend, [1], [1], 'f32')],
    ]);
    expect(b.loadStateDict(state)).toEqual({ missing: ['bias'], unexpected: ['extra'] });
    expect([...b.leaf.weight.toFloat64Array()]).toEqual([1, 2, 3]);
    expect([...b.bias.toFloat64Array()]).toEqual([0, 0]);
  });

  it('a shape mismatch throws, naming the parameter, and leaves every parameter unchanged', () => {
    const { base, ctxFor, backend } = setup();
    const b = base.createIn<Block>(ctxFor(base), 'L2/block', 3);
    const state = new Map([
      ['bias', Tensor.fromArray(backend, [7, 8], [2], 'f32')],
      ['leaf.weight', Tensor.fromArray(backend, [1, 2, 3, 4], [4], 'f32')],
    ]);
    expect(() => b.loadStateDict(state)).toThrow("loadStateDict: 'leaf.weight' has shape [4], expected [3]");
    expect([...b.bias.toFloat64Array()]).toEqual([0, 0]);
  });

  it('dispose releases every parameter, children included', () => {
    const { base, ctxFor, backend } = setup();
    const net = base.createIn<Net>(ctxFor(base), 'L3/net', 2);
    expect(backend.liveStorages.size).toBe(6);
    net.dispose();
    expect(backend.liveStorages.size).toBe(0);
    expect(net.blocks[0]!.leaf.weight.isDisposed).toBe(true);
  });

  it("dispose runs each child's own dispose (a cache a child keeps beyond its parameters is released with the tree)", () => {
    const { base, ctxFor, backend } = setup();
    class CachingLeaf extends Leaf {
      cache: Tensor | null = Tensor.fromArray(this.ctx.backend, [1, 2], [2], 'f32');
      override dispose(): void {
        this.cache?.dispose();
        this.cache = null;
        super.dispose();
      }
    }
    const child = base.child('caching');
    child.registerTask(task('L1/leaf', 1, 'Leaf', CachingLeaf as unknown as typeof Leaf));
    const net = child.createIn<Net>(ctxFor(child), 'L3/net', 2);
    expect(backend.liveStorages.size).toBe(8); // 6 parameters + the two blocks' leaf caches
    net.dispose();
    expect(backend.liveStorages.size).toBe(0);
  });
});
