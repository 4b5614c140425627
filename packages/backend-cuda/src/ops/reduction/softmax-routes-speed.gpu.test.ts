/**
 * The L1/softmax task's vocabulary rows (bf16 [B, 128256], B 1 / 32 / 256: bench/suites/kernels) on each softmax.cu
 * route the tuning can pick, timed as the kernels bench times them (L2 flushed before every call, device events
 * around one eager call), against a D2D copy of the same bytes timed alike. Printed, not asserted: the A/B that picks
 * softmax.clusterSize / clusterMaxRows / oneReadSliceBytes for few long rows (the register cluster, fk_softmax_cluster,
 * against the one-read shared-memory cluster, fk_softmax_smem). Lines: `kernel-speed: softmax <shape> [<route>] ...`.
 */
import { Tensor } from '@fastkernels/core';
import { describe, it } from 'vitest';
import { G, gpu, medianMs, printedAfterAll, randCpu, toGpu, withTuning } from '../../../test/spine-helpers.js';
import type { Tuning } from '../../tuning/schema.js';
import { lastSoftmaxLaunch } from './softmax.js';

const V = 128256;
/** Tuning patches of the softmax section: each sends these rows down another kernel or cluster shape. */
const ROUTES: readonly (readonly [string, Partial<Tuning['softmax']>])[] = [
  ['default', {}],
  ['register cluster of 4', { clusterSize: 4 }],
  // a register cluster of 2 cannot hold a 128k row: the plan takes the one-read kernel (its cluster from the slice size)
  ['one-read, 32 KiB slices', { clusterSize: 2 }],
  ['one-read, 64 KiB slices', { clusterSize: 2, oneReadSliceBytes: 65536 }],
  // rows past clusterMaxRows leave the register cluster (B1 stays on it)
  ['clusterMaxRows 1', { clusterMaxRows: 1 }],
];

describe('softmax routes for vocabulary rows (printed, not asserted)', () => {
  const lines = printedAfterAll();
  it('bf16 [1 | 32 | 256, 128256]: every route, L2 flushed, against a same-size copy', { ...G, timeout: 300_000 }, () => {
    const b = gpu();
    for (const B of [1, 32, 256]) {
      const x = toGpu(randCpu([B, V], 'bf16', B, 3));
      const bytes = 2 * B * V * 2; // read once, written once
      const src = Tensor.empty(b, [B * V], 'bf16');
      const dst = Tensor.empty(b, [B * V], 'bf16');
      try {
        src.fill_(1);
        const copyMs = medianMs(() => b.ops.copy(dst, src), 20, { flushL2: true });
        lines.push(`kernel-speed: softmax copy ${bytes} B ${(copyMs * 1e3).toFixed(1)} us`);
        for (const [name, patch] of ROUTES) {
          withTuning('softmax', patch, () => {
            const ms = medianMs(() => b.ops.softmax(x, -1).dispose(), 20, { flushL2: true });
            const p = lastSoftmaxLaunch?.plan;
            const route = p ? `${p.entry} cs ${p.cluster} x ${p.threads} threads${p.smem ? `, ${p.smem} B smem` : ''}` : 'unknown';
            lines.push(`kernel-speed: softmax bf16 [${B}, ${V}] [${name}: ${route}] ${(ms * 1e3).toFixed(1)} us = ${((copyMs / ms) * 100).toFixed(0)}% of a same-size copy`);
          });
        }
      } finally {
        for (const t of [x, src, dst]) t.dispose();
      }
    }
  });
});
