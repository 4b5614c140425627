/**
 * topk_softmax on the GPU (kernels/moe_topk_softmax.cu, one launch) against topk_softmax in float64 on the CPU (the
 * same logits): ids exactly, weights to float32 rounding. Mixtral (E 8, top-2), Qwen3-30B-A3B (E 128, top-8),
 * gpt-oss-20b (E 32, top-4) and Qwen3-Next (E 512, top-10) at 1, 7 and 4096 tokens, bf16 / f32 / f16 logits,
 * renormalised or not, and logits with a row stride past E; L1/topk_softmax's baseline (now the op) against the task's
 * float64 reference (topkSoftmaxReference) on its CI cases and at the three models' widths; a CUDA graph of the call
 * replayed over new logits; and the kernel's device time beside the op's decomposition's (printed, for issue 31).
 */
import { describe, expect, it } from 'vitest';
import { Rng, Tensor, callOp, opRoute, type DType, type TaskDefinition } from '@fastkernels/core';
import { sharedL1Tasks } from '@fastkernels/model-zoo';
import { G, checkGraphReplays, checkTaskOnCuda, cpu, kernelVsDecomposition, releasing, toGpu, variant } from '../../../test/spine-helpers.js';

const MODELS = [
  { name: 'Mixtral', E: 8, k: 2 },
  { name: 'Qwen3-30B-A3B', E: 128, k: 8 },
  { name: 'gpt-oss-20b', E: 32, k: 4 },
  { name: 'Qwen3-Next', E: 512, k: 10 },
];

/** N(0, 4) logits rounded to dtype on the CPU, and the same values as f64 (the reference's input). */
function logits(rng: Rng, T: number, E: number, dtype: DType): { x: Tensor; x64: Tensor } {
  const x = Tensor.fromArray(cpu(), rng.fillNormal(T * E, 2), [T, E], dtype);
  return { x, x64: Tensor.fromArray(cpu(), x.toFloat64Array(), [T, E], 'f64') };
}

/** The GPU outputs against the float64 CPU op: ids equal, weights within float32 rounding (expf, a sum of up to 512 terms). */
function expectRouted(outs: Tensor[], x64: Tensor, k: number, renormalize: boolean, label: string): void {
  const [w, ids] = callOp('topk_softmax', [x64], { k, renormalize });
  try {
    expect(Array.from(outs[1]!.toFloat64Array()), `${label}: ids`).toEqual(Array.from(ids!.toFloat64Array()));
    const got = outs[0]!.toFloat64Array();
    const want = w!.toFloat64Array();
    for (let i = 0; i < want.length; i++) {
      if (!(Math.abs(got[i]! - want[i]!) <= 2e-7 + 5e-6 * want[i]!)) throw new Error(`${label}: weight ${i} is ${got[i]}, float64 says ${want[i]}`);
    }
  } finally {
    w!.dispose();
    ids!.dispose();
  }
}

const topkTask = (): TaskDefinition => {
  const t = sharedL1Tasks.find((x) => x.id === 'L1/topk_softmax');
  if (!t) throw new Error('no task L1/topk_softmax');
  return t;
};

describe('topk_softmax on CUDA = float64', () => {
  for (const m of MODELS) {
    it(`${m.name} (E ${m.E}, top-${m.k}) at T 1, 7, 4096: bf16 / f32 / f16 logits, renormalised or not`, G, () => {
      releasing((keep) => {
        const rng = new Rng(60 + m.E);
        for (const T of [1, 7, 4096]) {
          for (const dtype of ['bf16', 'f32', 'f16'] as const) {
            for (const renormalize of [true, false]) {
              const { x, x64 } = logits(rng, T, m.E, dtype);
              keep([x, x64]);
              const g = keep(toGpu(x));
              const attrs = { k: m.k, renormalize };
              expect(opRoute('topk_softmax', [g], attrs)).toEqual({ via: 'kernel' });
              expectRouted(keep(callOp('topk_softmax', [g], attrs)), x64, m.k, renormalize, `${m.name} T ${T} ${dtype}${renormalize ? '' : ' raw'}`);
            }
          }
        }
      });
    });
  }

  it('logits with a row stride past E (a narrowed view) are read in place', G, () => {
    releasing((keep) => {
      const { x, x64 } = logits(new Rng(3), 33, 48, 'bf16');
      keep([x, x64]);
      const all = x.toFloat64Array();
      const rows = Array.from({ length: 33 * 32 }, (_, i) => all[Math.floor(i / 32) * 48 + (i % 32)]!);
      const ref = keep(Tensor.fromArray(cpu(), rows, [33, 32], 'f64'));
      const g = keep(toGpu(x));
      const view = g.narrow(1, 0, 32);
      expectRouted(keep(callOp('topk_softmax', [view], { k: 4, renormalize: true })), ref, 4, true, 'stride 48');
      view.dispose();
    });
  });

  const t = topkTask();
  const base = t.cases.ci[0]!;
  const cases = [
    ...t.cases.ci,
    ...MODELS.slice(0, 3).flatMap((m) => [1, 7, 4096].map((T) => variant(base, `${m.name}-T${T}-bf16`, { dtype: 'bf16', dims: { T, E: m.E, K: m.k }, init: [m.k, true] }))),
  ];
  for (const c of cases) it(`L1/topk_softmax ${c.name} (${c.dtype}) = topkSoftmaxReference`, G, () => checkTaskOnCuda(t, c, 13));

  it('a CUDA graph of the call: replays over new logits = float64', G, () => {
    releasing((keep) => {
      const [T, E, k] = [64, 128, 8];
      const rng = new Rng(5);
      const g = keep(toGpu(keep(logits(rng, T, E, 'bf16').x)));
      checkGraphReplays(keep, 'topk_softmax', g, { k, renormalize: true }, 2, (r) => {
        const next = logits(rng, T, E, 'bf16');
        keep([next.x, next.x64]);
        return { values: next.x, check: (outs) => expectRouted(outs, next.x64, k, true, `replay ${r}`) };
      });
    });
  });

  it('device time in a graph: the kernel vs the decomposition (printed)', G, () => {
    releasing((keep) => {
      for (const m of MODELS) {
        for (const T of [1, 64, 4096]) {
          const g = keep(toGpu(keep(logits(new Rng(T), T, m.E, 'bf16').x)));
          const times = kernelVsDecomposition('topk_softmax', [g], { k: m.k, renormalize: true });
          console.log(`topk_softmax ${m.name} E ${m.E} top-${m.k} T ${T}: ${times} (graph replays, H100 / H200: say which)`);
        }
      }
    });
  });
});
