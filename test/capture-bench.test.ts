import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BenchReportSchema, CaptureIndexSchema } from '@fastkernels/core';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, cli } from './helpers.js';

const tmp = mkdtempSync(join(tmpdir(), 'fk-capture-bench-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

// The loop the issue describes: `capture` records what production feeds each module, `bench --captures` replays it.
// Every recorded case must bench: a case the harness cannot build (e.g. a layer past the first, whose KV cache the
// case's forward context lacked) would drop out as SKIPPED and silently shrink the coverage.
describe('capture -> bench', () => {
  it('every case captured from the tiny Llama (bf16, two layers, chunked prefill) benches PASSED, none skipped', () => {
    const caps = join(tmp, 'caps');
    const model = join(ROOT, 'packages/model-zoo/fixtures/tiny-llama');
    const c = cli(['capture', '--model', model, '--backend', 'cpu', '--dtype', 'bf16', '--workload', 'synthetic:3:4-20:2-4:0', '--max-num-batched-tokens', '16', '--max-model-len', '64', '--out', caps]);
    expect(c.code, c.stderr).toBe(0);
    const index = CaptureIndexSchema.parse(JSON.parse(readFileSync(join(caps, 'index.json'), 'utf8')));
    const captured = Object.keys(index.tasks).sort();
    // both layers' modules are recorded with their own layer index
    expect(index.tasks['L2/attention']!.init.map((a) => a[10] ?? 0).sort()).toEqual([0, 1]);
    // a bf16 model's cases are bf16, the whole model's (fed only token ids and positions) too
    expect(new Set(index.tasks['L4/llama']!.forward.map((f) => f.dtype))).toEqual(new Set(['bf16']));

    const r = cli(['bench', '--self-test', '--backend', 'cpu', '--captures', caps, '--max-shapes', '4', '--iters', '0', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    const rows = report.results.filter((x) => x.case.startsWith('cap-'));
    expect([...new Set(rows.map((x) => x.task))].sort()).toEqual(captured);
    for (const x of rows) expect(x.status, `${x.task} ${x.case}: ${x.detail ?? ''}`).toBe('PASSED');
  });
});
