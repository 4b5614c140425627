// The contract tests' leak check (test/leak-check.ts) itself: each kind of leak it must report, and what it must not.
import { F, Module, ModuleRegistry, Tensor, withContext, type ExecutionContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../test/l1-harness.js';
import { disposeAndFindLeaks, leakSnapshot } from '../../test/leak-check.js';

type Mode = 'clean' | 'intermediate' | 'input-view' | 'weight-view' | 'returns-input' | 'cache';

class Toy extends Module {
  readonly weight: Tensor;
  private cache: Tensor | null = null;
  constructor(readonly mode: Mode) {
    super();
    this.weight = this.parameter('weight', [3]);
  }
  forward(x: Tensor): Tensor | Tensor[] {
    const t = F.add(x, this.weight);
    const y = F.mul(t, x);
    if (this.mode !== 'intermediate') t.dispose();
    if (this.mode === 'input-view') x.view(3, 1);
    if (this.mode === 'weight-view') this.weight.view(1, 3);
    if (this.mode === 'returns-input') return [y, x];
    if (this.mode === 'cache') this.cache ??= Tensor.zeros(this.ctx.backend, [4], 'f32');
    return y;
  }
  override dispose(): void {
    this.cache?.dispose();
    this.cache = null;
    super.dispose();
  }
}

function leaksOf(mode: Mode): string[] {
  const backend = cpuBackend();
  const ctx: ExecutionContext = { backend, device: 0, dtype: 'f32', registry: new ModuleRegistry() };
  return withContext(ctx, () => {
    const m = new Toy(mode);
    const x = Tensor.fromArray(backend, [Math.random(), 2, 3], [3], 'f32');
    const snap = leakSnapshot(backend, [x], m)!;
    const found = disposeAndFindLeaks(snap, m.forward(x), [], m);
    expect(x.isDisposed, 'an output that is the input itself stays the caller\'s').toBe(false);
    x.dispose();
    return found;
  });
}

describe('the contract tests\' leak check', () => {
  it('passes a forward that releases its intermediates, returns an input, or keeps a cache its dispose() releases', () => {
    for (const mode of ['clean', 'returns-input', 'cache'] as const) expect(leaksOf(mode), mode).toEqual([]);
  });
  it('reports an intermediate left alive, and views left on an input or a parameter', () => {
    expect(leaksOf('intermediate')).toEqual([expect.stringMatching(/^1 storage\(s\) forward allocated left alive .* bytes 12$/)]);
    expect(leaksOf('input-view')).toEqual([expect.stringMatching(/^1 handle\(s\) left on input 0's storage/)]);
    expect(leaksOf('weight-view')).toEqual([expect.stringMatching(/^1 handle\(s\) left on weight's storage/)]);
  });
});
