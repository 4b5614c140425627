/** gpt-oss's MoE block: the composite contract on its CI cases, the SwiGLU and MXFP4 decode by hand, and MXFP4 == dense. */
import { Rng, Tensor, TaskCaseSchema, compareTensors, hostArray, toHostArray, withContext } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cpuBackend } from '../../../test/l1-harness.js';
import { describeCompositeContract } from '../../../test/composite-harness.js';
import { baselineRegistry } from '../../index.js';
import { GptOssMoE, gptOssMoeTask, initGptOssMoeParameters } from './L2/gpt_oss_moe.js';
import { mxfp4MoeTask } from './L2/mxfp4_moe.js';
import { decodeMxfp4, gptOssMoeBlock, gptOssSwiglu } from './gpt-oss/reference.js';

describeCompositeContract(gptOssMoeTask, cpuBackend);
describeCompositeContract(mxfp4MoeTask, cpuBackend);

describe('the MXFP4 block is built through the registry', () => {
  it("GptOssMoE's MXFP4 experts are L2/mxfp4_moe (a candidate for it runs inside gpt-oss); dense ones are its own child", () => {
    const registry = baselineRegistry();
    const ctx = { backend: cpuBackend(), device: 0, dtype: 'f32', registry } as const;
    const q = registry.createIn<GptOssMoE>(ctx, 'L2/gpt_oss_moe', 64, 8, 2, 32, 7, 'mxfp4');
    const d = registry.createIn<GptOssMoE>(ctx, 'L2/gpt_oss_moe', 64, 8, 2, 32, 7, 'dense');
    expect(q.experts.constructor.name).toBe('Mxfp4MoE');
    expect(d.experts.constructor.name).toBe('GptOssExperts');
    expect(q.namedParameters().map(([n]) => n)).toEqual(['router.weight', 'router.bias', 'experts.gate_up_proj_blocks', 'experts.gate_up_proj_scales', 'experts.gate_up_proj_bias', 'experts.down_proj_blocks', 'experts.down_proj_scales', 'experts.down_proj_bias']);
    q.dispose();
    d.dispose();
  });
});

describe('gpt-oss SwiGLU and MXFP4 by hand', () => {
  it('clamps gate above only and up on both sides; (up + 1) * gate * sigmoid(1.702 gate)', () => {
    const sig = (z: number) => 1 / (1 + Math.exp(-z));
    expect(gptOssSwiglu(1, 2, 7)).toBeCloseTo(3 * sig(1.702), 14);
    expect(gptOssSwiglu(20, 0, 7)).toBeCloseTo(7 * sig(7 * 1.702), 14); // gate clamped to 7
    expect(gptOssSwiglu(-20, 0, 7)).toBeCloseTo(-20 * sig(-20 * 1.702), 20); // not clamped below
    expect(gptOssSwiglu(1, 20, 7)).toBeCloseTo(8 * sig(1.702), 14); // up clamped to 7
    expect(gptOssSwiglu(1, -20, 7)).toBeCloseTo(-6 * sig(1.702), 14); // and to -7
  });

  it('decodes a block: low nibble first, sign bit 8, scale 2^(s - 127)', () => {
    const bytes = new Array<number>(16).fill(0);
    bytes[0] = 0x72; // element 0: 0x2 = 1, element 1: 0x7 = 6
    bytes[1] = 0x9f; // element 2: 0xf = -6, element 3: 0x9 = -0.5
    const w = decodeMxfp4(hostArray([1, 1, 16], bytes), hostArray([1, 1], [128]));
    expect(w.shape).toEqual([1, 32]);
    expect([...w.data.slice(0, 5)]).toEqual([2, 12, -12, -1, 0]);
  });
});

describe('the MXFP4 experts equal the dense experts built from their decoded weights', () => {
  it.each([['f32', 1e-5], ['bf16', 3e-2]] as const)('%s', (dtype, tol) => {
    const [T, H, I, E, K] = [11, 64, 32, 8, 2];
    const registry = baselineRegistry();
    const ctx = { backend: cpuBackend(), device: 0, dtype, registry } as const;
    const rng = new Rng(4);
    const q = registry.createIn<GptOssMoE>(ctx, 'L2/gpt_oss_moe', H, E, K, I, 7, 'mxfp4');
    const d = registry.createIn<GptOssMoE>(ctx, 'L2/gpt_oss_moe', H, E, K, I, 7, 'dense');
    initGptOssMoeParameters(q, rng);
    const qp = new Map(q.namedParameters().map(([k, t]) => [k, toHostArray(t)] as const));
    const dp = new Map(d.namedParameters());
    const set = (name: string, values: ArrayLike<number>) => {
      const t = Tensor.fromArray(ctx.backend, Array.from(values), dp.get(name)!.shape, dtype);
      dp.get(name)!.copy_(t);
      t.dispose();
    };
    /** MXFP4 rows [E, out, in] -> HF's dense [E, in, out]. */
    const dense = (prefix: string) => {
      const w = decodeMxfp4(qp.get(`${prefix}_blocks`)!, qp.get(`${prefix}_scales`)!);
      const [e, o, i] = w.shape as [number, number, number];
      const out = new Float64Array(w.data.length);
      for (let a = 0; a < e; a++) for (let b = 0; b < o; b++) for (let c = 0; c < i; c++) out[(a * i + c) * o + b] = w.data[(a * o + b) * i + c]!;
      return out;
    };
    set('experts.gate_up_proj', dense('experts.gate_up_proj'));
    set('experts.down_proj', dense('experts.down_proj'));
    for (const n of ['router.weight', 'router.bias', 'experts.gate_up_proj_bias', 'experts.down_proj_bias']) set(n, qp.get(n)!.data);
    withContext(ctx, () => {
      const x = Tensor.fromArray(ctx.backend, rng.fillNormal(T * H, 1), [T, H], dtype);
      const yq = q.forward(x);
      const yd = d.forward(x);
      expect(compareTensors(yq, yd, { atol: tol, rtol: tol }).status).toBe('PASSED');
      // and both against the float64 reference of the MXFP4 checkpoint
      const ref = gptOssMoeBlock(toHostArray(x).data, T, qp, '', K, 7);
      expect(compareTensors(yq, hostArray([T, H], ref), { atol: tol, rtol: tol }).status).toBe('PASSED');
      expect(yq.toFloat64Array().some((v) => Math.abs(v) > 0.1)).toBe(true);
      for (const t of [x, yq, yd]) t.dispose();
    });
    q.dispose();
    d.dispose();
  });
});
