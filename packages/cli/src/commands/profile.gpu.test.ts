/**
 * `fastkernels profile` on CUDA (tag gpu): the tiny YOLOv10 (fp16, the production dtype), BGE-M3 and Llama configs, random
 * weights (BGE-M3's drawn on the device). Modules are timed by device events: the report names them, the self times and the rest sum
 * to the profiled forward, the vision runner's graph replay is timed beside the eager forward, and the tasks are the
 * CPU run's (the same model). The fixtures' configs travel as JSON imports (the GPU host has no checkout).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import bgeConfig from '../../../model-zoo/fixtures/tiny-bge-m3/config.json' with { type: 'json' };
import llamaConfig from '../../../model-zoo/fixtures/tiny-llama/config.json' with { type: 'json' };
import yoloConfig from '../../../model-zoo/fixtures/tiny-yolov10/config.json' with { type: 'json' };
import type { ProfileReport } from '../profile/report.js';
import { runProfile, type ProfileArgs } from './profile.js';

const tmp = mkdtempSync(join(tmpdir(), 'fk-profile-gpu-'));
for (const [name, cfg] of [['tiny-yolov10', yoloConfig], ['tiny-bge-m3', bgeConfig], ['tiny-llama', llamaConfig]] as const) {
  mkdirSync(join(tmp, name));
  writeFileSync(join(tmp, name, 'config.json'), JSON.stringify(cfg));
}

function profileOn(backend: string, args: Partial<ProfileArgs>): ProfileReport {
  return runProfile({ model: join(tmp, 'tiny-yolov10'), backend, warmups: 2, repeats: 3, top: 25, seed: 0, json: true, ...args }, { out: () => {}, err: () => {} });
}

function expectConsistent(r: ProfileReport): void {
  const selfSum = r.tasks.reduce((a, t) => a + t.self_ms, 0) + r.unattributed_ms;
  expect(selfSum).toBeCloseTo(r.forward.profiled.mean_ms, 6);
  // device events resolve about 0.5 us: a parent's self may dip that far below zero
  for (const t of r.tasks) expect(t.inclusive_ms).toBeGreaterThanOrEqual(t.self_ms - 1e-3);
  expect(r.tasks.every((t) => t.self_ms > -5e-3)).toBe(true);
}

describe('fastkernels profile on CUDA', () => {
  it('tiny YOLOv10 fp16, batch 4: device-event timings behind a head start, eager and graph forwards, the CPU run\'s convs', { tags: ['gpu'], timeout: 300_000 }, () => {
    const gpu = profileOn('cuda', { dtype: 'f16', batch: 4 });
    expect(gpu).toMatchObject({ backend: 'cuda', timer: 'device events', profiled_graphs: false, dtype: 'f16', weights: 'random' });
    expect(gpu.forward.graphs).not.toBeNull();
    expect(gpu.forward.graphs!.mean_ms).toBeGreaterThan(0);
    expect(gpu.forward.eager.mean_ms).toBeGreaterThan(0);
    expect(gpu.workload.description).toMatch(/channels-last/);
    // the head start: matmuls queued ahead of each profiled forward; a tiny model launches in well under its lead
    expect(gpu.queue_ahead).not.toBeNull();
    expect(gpu.queue_ahead!.lead_ms).toBeGreaterThan(10);
    expect(gpu.queue_ahead!.held).toBeGreaterThanOrEqual(1); // a GC pause mid-launch may outlast one lead
    const asLaunched = profileOn('cuda', { dtype: 'f16', batch: 4, queueAhead: false });
    expect(asLaunched.queue_ahead).toBeNull();
    expectConsistent(asLaunched);
    expectConsistent(gpu);
    const cpu = profileOn('cpu', { dtype: 'f32', batch: 1, warmups: 0, repeats: 1 });
    // the same module tree: every conv runs as its own module forward on both backends
    expect(gpu.tasks.find((t) => t.task === 'L1/conv2d')!.calls).toBe(cpu.tasks.find((t) => t.task === 'L1/conv2d')!.calls);
    expect(gpu.tasks.map((t) => t.task)).toEqual(expect.arrayContaining(['L1/conv2d', 'L1/silu', 'L3/yolov10_head']));
  });

  it('tiny BGE-M3 bf16, --by-shape: one packed forward, device-event timings', { tags: ['gpu'], timeout: 300_000 }, () => {
    const r = profileOn('cuda', { model: join(tmp, 'tiny-bge-m3'), dtype: 'bf16', batch: 8, lengths: '4-30', byShape: true });
    expect(r).toMatchObject({ kind: 'encoder', timer: 'device events', forward: { graphs: null }, queue_ahead: null });
    expect(r.tasks.map((t) => t.task)).toContain('L1/flash_attn_varlen');
    expectConsistent(r);
  });

  it('tiny Llama bf16: a decode step of 4 sequences (eager and its captured graph timed) and a prefill step', { tags: ['gpu'], timeout: 300_000 }, () => {
    const dec = profileOn('cuda', { model: join(tmp, 'tiny-llama'), dtype: 'bf16', phase: 'decode', batch: 4, tokens: 32 });
    expect(dec).toMatchObject({ kind: 'llm', timer: 'device events', workload: { phase: 'decode', batch: 4 } });
    expect(dec.forward.graphs).not.toBeNull();
    expect(dec.tasks.map((t) => t.task)).toContain('L1/paged_decode_attention');
    expectConsistent(dec);
    const pre = profileOn('cuda', { model: join(tmp, 'tiny-llama'), dtype: 'bf16', phase: 'prefill', tokens: 64 });
    expect(pre).toMatchObject({ kind: 'llm', workload: { phase: 'prefill', prompt_tokens: 64 }, forward: { graphs: null } });
    expectConsistent(pre);
  });
});
