/**
 * mxfp4_dequant's generated kernel (to f32) run on the host (test/host-cuda.ts: g++, CTA threads as std::threads) with
 * the launcher's geometry, against the CPU op bit for bit: every byte value, scales from 0 to 255 (NaN) and a grid
 * smaller than the groups (the grid-stride loop). Skipped where g++ is absent.
 */
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Rng, Tensor, callOp1 } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { cArray, hasGxx, runOnHost } from '../../../test/host-cuda.js';
import { MXFP4_DEQUANT_THREADS, mxfp4DequantSource } from './mxfp4-source.js';

describe(`mxfp4_dequant's generated kernel on the host${hasGxx ? '' : ' (SKIPPED: g++ not on PATH)'}`, () => {
  it.skipIf(!hasGxx)('to f32, every byte and scale, a grid-stride loop', () => {
    const cpu = new CpuBackend();
    const groups = 300; // more than one CTA's 256 threads, run on a grid of 1 CTA
    const rng = new Rng(3);
    const blocks = Array.from({ length: groups * 16 }, (_, i) => (i < 256 ? i : rng.int(0, 256)));
    const scales = Array.from({ length: groups }, (_, i) => (i < 256 ? i : 255));
    const tb = Tensor.fromArray(cpu, blocks, [groups, 16], 'u8');
    const ts = Tensor.fromArray(cpu, scales, [groups], 'u8');
    const want = callOp1('mxfp4_dequant', [tb, ts], { dtype: 'f32' }).toFloat64Array();
    const main = `${cArray('unsigned char', 'blocks', blocks)}
${cArray('unsigned char', 'scales', scales)}
alignas(16) static float out[${groups * 32}];
int main() {
  fk_launch({1, 1, 1}, ${MXFP4_DEQUANT_THREADS}, [] { fk_mxfp4_dequant(out, blocks, scales, ${groups}LL); });
  for (int i = 0; i < ${groups * 32}; i++) printf("%.17g\\n", (double)out[i]);
}`;
    const got = runOnHost(mxfp4DequantSource('f32').source, main);
    expect(got.length).toBe(want.length);
    const bad: string[] = [];
    for (let i = 0; i < want.length && bad.length < 8; i++) if (!(got[i] === want[i] || (Number.isNaN(got[i]!) && Number.isNaN(want[i]!)))) bad.push(`[${i}] ${got[i]} vs ${want[i]}`);
    expect(bad).toEqual([]);
    tb.dispose();
    ts.dispose();
  }, 120_000);
});
