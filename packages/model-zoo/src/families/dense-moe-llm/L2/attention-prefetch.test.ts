import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, toHostArray, type Module, type Ops, type Tensor } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { baselineRegistry } from '../../../index.js';
import { attentionTask } from './attention.js';

interface AttentionParts {
  oProj: { weight: Tensor };
  qkvProj: { weight: Tensor };
  forward(positions: Tensor, hidden: Tensor): Tensor;
}

/**
 * The CPU backend with Ops.prefetchWeight present (returning a join, or null as a backend that starts nothing) and
 * linear logged by which projection's weight it reads: the order the attention layer calls them in.
 */
class PrefetchLogBackend extends CpuBackend {
  readonly calls: string[] = [];
  names = new Map<Tensor, string>();
  constructor(join: boolean) {
    super();
    const base = this.ops;
    const ops: Ops = Object.assign(Object.create(Object.getPrototypeOf(base) as object) as Ops, base, {
      linear: (x: Tensor, w: Tensor, b: Tensor | null) => (this.calls.push(`linear ${this.names.get(w) ?? '?'}`), base.linear(x, w, b)),
      prefetchWeight: (w: Tensor, rows: number) => {
        this.calls.push(`prefetch ${this.names.get(w) ?? '?'} rows ${rows}`);
        return join ? () => void this.calls.push('join') : null;
      },
    });
    (this as { ops: Ops }).ops = ops;
  }
}

function run(backend: PrefetchLogBackend, caseName: string) {
  const c = attentionTask.cases.ci.find((x) => x.name === caseName)!;
  const ctx = { backend, device: 0, dtype: c.dtype, registry: baselineRegistry() };
  const m = ctx.registry.createIn<AttentionParts & Module>(ctx, 'L2/attention', ...c.init);
  const rng = new Rng(5);
  attentionTask.initParameters!(m, c, rng);
  backend.names = new Map([[m.qkvProj.weight, 'qkv'], [m.oProj.weight, 'o']]);
  const [positions, hidden] = attentionTask.makeInputs(c, ctx, rng) as [Tensor, Tensor];
  const out = m.forward(positions, hidden);
  const host = Array.from(toHostArray(out).data);
  out.dispose();
  m.dispose();
  return { out: host, calls: backend.calls, tokens: hidden.shape[0]! };
}

describe('LlamaAttention: o_proj weight prefetch hint (Ops.prefetchWeight)', () => {
  for (const caseName of ['llama3-scaled-head32-decode-f32', 'mixed-gqa-f32']) {
    it(`${caseName}: asked right after the qkv projection, joined right before o_proj; the same output`, () => {
      const joined = run(new PrefetchLogBackend(true), caseName);
      expect(joined.calls).toEqual(['linear qkv', `prefetch o rows ${joined.tokens}`, 'join', 'linear o']);
      const none = run(new PrefetchLogBackend(false), caseName);
      expect(none.calls).toEqual(['linear qkv', `prefetch o rows ${none.tokens}`, 'linear o']);
      expect(none.out).toEqual(joined.out);
      const plain = new CpuBackend();
      const c = attentionTask.cases.ci.find((x) => x.name === caseName)!;
      const ctx = { backend: plain, device: 0, dtype: c.dtype, registry: baselineRegistry() };
      const m = ctx.registry.createIn<AttentionParts & Module>(ctx, 'L2/attention', ...c.init);
      const rng = new Rng(5);
      attentionTask.initParameters!(m, c, rng);
      const [positions, hidden] = attentionTask.makeInputs(c, ctx, rng) as [Tensor, Tensor];
      expect(Array.from(toHostArray(m.forward(positions, hidden)).data)).toEqual(joined.out);
    });
  }
});
