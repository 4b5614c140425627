/**
 * torch.nn.Sequential, ModuleList and ModuleDict: children named '0', '1', ... (or by key), so parameter paths are
 * PyTorch's (`features.0.weight`, `blocks.3.norm.bias`).
 */
import { Module, type Tensor } from '@fastkernels/core';

/** A module with a one-tensor forward (what Sequential chains). */
export type TensorModule = Module & { forward(x: Tensor): Tensor };

/** torch.nn.Sequential(*modules): forward chains the children, disposing each intermediate result it made. */
export class Sequential extends Module {
  private readonly items: TensorModule[] = [];
  constructor(...modules: TensorModule[]) {
    super();
    modules.forEach((m) => this.append(m));
  }

  append(m: TensorModule): this {
    this.items.push(this.registerModule(String(this.items.length), m));
    return this;
  }

  get length(): number {
    return this.items.length;
  }

  at(i: number): TensorModule {
    const m = this.items[i < 0 ? i + this.items.length : i];
    if (!m) throw new RangeError(`Sequential: index ${i} out of range for ${this.items.length} modules`);
    return m;
  }

  [Symbol.iterator](): Iterator<TensorModule> {
    return this.items[Symbol.iterator]();
  }

  forward(x: Tensor): Tensor {
    let h = x;
    for (const m of this.items) {
      const next = m.forward(h);
      // Identity-like children (Dropout, Identity) return their input: keep it; free only what this chain made.
      if (h !== x && next !== h) h.dispose();
      h = next;
    }
    return h;
  }
}

/** torch.nn.ModuleList(modules): an indexed container; its owner calls the children. */
export class ModuleList<M extends Module = Module> extends Module {
  private readonly items: M[] = [];
  constructor(modules: readonly M[] = []) {
    super();
    modules.forEach((m) => this.append(m));
  }

  append(m: M): this {
    this.items.push(this.registerModule(String(this.items.length), m));
    return this;
  }

  get length(): number {
    return this.items.length;
  }

  at(i: number): M {
    const m = this.items[i < 0 ? i + this.items.length : i];
    if (!m) throw new RangeError(`ModuleList: index ${i} out of range for ${this.items.length} modules`);
    return m;
  }

  [Symbol.iterator](): Iterator<M> {
    return this.items[Symbol.iterator]();
  }

  forward(): never {
    throw new Error('ModuleList is a container: call its modules (PyTorch: ModuleList has no forward)');
  }
}

/** torch.nn.ModuleDict(modules): children by key, in insertion order. */
export class ModuleDict<M extends Module = Module> extends Module {
  private readonly items = new Map<string, M>();
  constructor(modules: Readonly<Record<string, M>> = {}) {
    super();
    for (const [k, m] of Object.entries(modules)) this.set(k, m);
  }

  set(key: string, m: M): this {
    if (!/^[^.]+$/.test(key)) throw new RangeError(`ModuleDict: key '${key}' must be non-empty and contain no '.' (it is a segment of parameter paths)`);
    if (this.items.has(key)) throw new RangeError(`ModuleDict: key '${key}' is already set`);
    this.items.set(key, this.registerModule(key, m));
    return this;
  }

  get(key: string): M {
    const m = this.items.get(key);
    if (!m) throw new RangeError(`ModuleDict: no module '${key}' (keys: ${[...this.items.keys()].join(', ')})`);
    return m;
  }

  keys(): string[] {
    return [...this.items.keys()];
  }

  forward(): never {
    throw new Error('ModuleDict is a container: call its modules (PyTorch: ModuleDict has no forward)');
  }
}
