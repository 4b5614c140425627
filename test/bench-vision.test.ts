// The vision speed suite (bench/suites/vision, issues 33 / 34) where no GPU is needed: the iteration rule both sides
// share, the merge into vision.json (targets binding on an H200 only, FLUX's GEMM + attention floor, a side that wrote
// nothing), the headline bench/run records, and the whole chain's smoke run: run.sh --tiny --backend cpu through a
// stand-in bundle (the built CLI for init-weights, the repo's driver on this node), PyTorch's side on the CPU where a
// Python here imports torch, vision.json checked against a zod schema.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { HEADLINES, measuredNothing } from '../bench/lib/record.mjs';
import { TARGETS, formatVision, itersFor, mergeVision, type VisionPlan } from '../bench/suites/vision/vision-lib.mjs';
import { BIN } from './helpers.js';

const SUITE = resolve(import.meta.dirname, '../bench/suites/vision');
const dir = mkdtempSync(join(tmpdir(), 'fk-bench-vision-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MODELS = ['yolov10n', 'yolov10s', 'convnextv2_base', 'flux_transformer', 'flux_vae'];
const plan: VisionPlan = {
  tiny: false, quick: false, models: MODELS, fluxLayers: [19, 38], fluxFullDepth: true, timeBudgetS: 1.5, minIters: 3, maxIters: 100, convAlgoSearch: 'benchmark',
  inputs: { yolov10n: { imageSize: 640 }, yolov10s: { imageSize: 640 }, convnextv2_base: { imageSize: 384 }, flux_transformer: { imageTokens: 4096 }, flux_vae: { latent: [16, 128, 128] } },
  rows: [
    { id: 'yolov10n-bs1', model: 'yolov10n', batch: 1, dtype: 'f16', compile: ['default', 'reduce-overhead'] },
    { id: 'yolov10n-bs32', model: 'yolov10n', batch: 32, dtype: 'f16', compile: ['default', 'reduce-overhead'] },
    { id: 'yolov10s-bs1', model: 'yolov10s', batch: 1, dtype: 'f16', compile: ['default', 'reduce-overhead'] },
    { id: 'yolov10s-bs32', model: 'yolov10s', batch: 32, dtype: 'f16', compile: ['default'] },
    { id: 'convnextv2_base-bs32', model: 'convnextv2_base', batch: 32, dtype: 'bf16', compile: ['default'] },
    { id: 'flux_transformer-bs1', model: 'flux_transformer', batch: 1, dtype: 'bf16', compile: ['default'] },
    { id: 'flux_vae-bs1', model: 'flux_vae', batch: 1, dtype: 'bf16', compile: ['default'] },
  ],
};
const side = (model: string, rows: Record<string, Record<string, unknown>>, extra: Record<string, unknown> = {}) => ({ model, rows, errors: [], ...extra });
const torchVersions = (gpu: string) => ({ versions: { torch: '2.9.0', gpu } });
/** Both sides of every model: ours 1 ms a row except where given; torch's times as given. */
function sides(gpu: string) {
  const ours = {
    yolov10n: side('yolov10n', { 'yolov10n-bs1': { ms: 0.9 }, 'yolov10n-bs32': { ms: 10 } }, { device: gpu, backend: 'cuda' }),
    yolov10s: side('yolov10s', { 'yolov10s-bs1': { ms: 1.2 }, 'yolov10s-bs32': { ms: 20 } }),
    convnextv2_base: side('convnextv2_base', { 'convnextv2_base-bs32': { ms: 50 } }),
    flux_transformer: side('flux_transformer', { 'flux_transformer-bs1': { ms: 200 } }),
    flux_vae: side('flux_vae', { 'flux_vae-bs1': { ms: 120 } }),
  };
  const torch = {
    yolov10n: side('yolov10n', {
      'yolov10n-bs1': { eagerMs: 4, compileMs: 1.5, compileCudagraphsMs: 1.0, flops: { total: 6.76e9 } },
      'yolov10n-bs32': { eagerMs: 20, compileMs: 12, compileCudagraphsMs: 9, flops: { total: 32 * 6.76e9 } },
    }, torchVersions(gpu)),
    yolov10s: side('yolov10s', { 'yolov10s-bs1': { eagerMs: 4 }, 'yolov10s-bs32': { eagerMs: 30 } }, torchVersions(gpu)),
    convnextv2_base: side('convnextv2_base', { 'convnextv2_base-bs32': { eagerMs: 80, compileMs: 49, flops: { total: 32 * 90.2e9 } } }, torchVersions(gpu)),
    flux_transformer: side('flux_transformer', { 'flux_transformer-bs1': { eagerMs: 260, compileMs: 230, floor: { gemmMs: 160, attentionMs: 20, sumMs: 180 } } }, torchVersions(gpu)),
    flux_vae: side('flux_vae', { 'flux_vae-bs1': { eagerMs: 100 } }, torchVersions(gpu)),
  };
  return { ours, torch };
}

describe('bench/suites/vision/vision-lib.mjs', () => {
  it('itersFor: the time budget over one call, clamped to [minIters, maxIters]', () => {
    expect(itersFor(plan, 1)).toBe(100);
    expect(itersFor(plan, 50)).toBe(30);
    expect(itersFor(plan, 5000)).toBe(3);
    expect(itersFor(plan, 10, 0.25)).toBe(25);
  });

  it('merge on an H200: ratios, TFLOP/s and matrix fractions, the best compile mode, FLUX over its floor; verdicts binding', () => {
    const m = mergeVision({ plan, ...sides('NVIDIA H200'), rateOurs: { n: 8192, tflops: 700 }, commit: 'abc' });
    const byId = Object.fromEntries(m.rows.map((r: { id: string }) => [r.id, r]));
    expect(byId['yolov10n-bs32'].torch.bestCompileMs).toBe(9);
    expect(byId['yolov10n-bs32'].speedup.bestCompile).toBeCloseTo(0.9, 12);
    expect(byId['yolov10n-bs1'].tflops.ours).toBeCloseTo(6.76e9 / 0.9e-3 / 1e12, 9);
    expect(byId['convnextv2_base-bs32'].fracMatrix.ours).toBeCloseTo((32 * 90.2e9) / 50e-3 / 1e12 / 700, 9);
    expect(byId['flux_transformer-bs1'].floor.oursOverSum).toBeCloseTo(200 / 180, 12);
    const t = Object.fromEntries(m.targets.map((g: { id: string }) => [g.id, g]));
    expect(m.targets.map((g: { id: string }) => g.id)).toEqual(TARGETS.map((g) => g.id));
    expect(t['yolov10n-bs1-vs-compile-cudagraphs']).toMatchObject({ value: 0.9, verdict: 'PASS', informative: false });
    expect(t['yolov10n-bs1-vs-eager']).toMatchObject({ verdict: 'PASS' });
    expect(t['yolov10n-bs1-vs-eager'].value).toBeCloseTo(0.9 / 4, 12);
    expect(t['yolov10n-bs32-vs-compile']).toMatchObject({ verdict: 'MISS' });
    expect(t['convnextv2-base-bs32-vs-compile']).toMatchObject({ value: 49 / 50, verdict: 'MISS' });
    expect(t['flux-step-vs-compile']).toMatchObject({ value: 230 / 200, verdict: 'PASS' });
    expect(t['flux-step-vs-gemm-attention']).toMatchObject({ verdict: 'PASS' });
    expect(t['vae-decode-vs-eager']).toMatchObject({ value: 100 / 120, verdict: 'MISS' });
    expect(m.summary).toMatchObject({ yolov10nBs1LatencyVsCompileCg: 0.9, targetsPassed: '4/7' });
    expect(m.errors).toEqual([]);
    const lines = formatVision(m);
    expect(lines.slice(-7).every((l: string) => l.startsWith('target: '))).toBe(true);
    expect(lines.join('\n')).toMatch(/flux_transformer-bs1: GEMMs 160.00 ms \+ attention 20.00 ms = 180.00 ms/);
    // both sides ran the plan's conv algorithm policy; the header and the JSON say which
    expect(m.settings.convAlgoSearch).toBe('benchmark');
    expect(lines.join('\n')).toMatch(/conv algorithms: cuDNN's benchmark search on both sides/);
    const { convAlgoSearch: _, ...oldPlan } = plan;
    expect(mergeVision({ plan: oldPlan, ...sides('NVIDIA H200') }).settings.convAlgoSearch).toMatch(/^mixed/);
  });

  it('elsewhere the verdicts are informative and say why; a side that wrote nothing or torch not run is an error', () => {
    const { ours, torch } = sides('NVIDIA H100 80GB HBM3');
    const m = mergeVision({ plan: { ...plan, fluxLayers: [2, 2], fluxFullDepth: false }, ours: { ...ours, flux_vae: null }, torch, logs: { 'flux_vae/ours': 'out of memory' } });
    expect(m.targets.every((g: { informative: boolean }) => g.informative)).toBe(true);
    expect(m.targets.find((g: { id: string }) => g.id === 'flux-step-vs-compile').why).toMatch(/NVIDIA H100.*; FLUX cut to 2 \+ 2 blocks/);
    expect(m.targets.find((g: { id: string }) => g.id === 'vae-decode-vs-eager')).toMatchObject({ value: null, verdict: 'NOT MEASURED' });
    expect(m.errors).toEqual([{ model: 'flux_vae', side: 'ours', error: 'wrote nothing: out of memory' }]);
    expect(formatVision(m).join('\n')).toMatch(/NOTE: FLUX transformer cut to 2 double \+ 2 single blocks/);
    const skipped = mergeVision({ plan, ours, torch: {}, torchSkipped: 'preflight failed: no torch' });
    expect(skipped.errors).toEqual([{ model: '*', side: 'torch', error: 'not run: preflight failed: no torch' }]);
    expect(skipped.targets.every((g: { verdict: string }) => g.verdict === 'NOT MEASURED')).toBe(true);
  });

  it("bench/run's headline: the target values, our ms per row and the pass count; an empty result records nothing", () => {
    const m = mergeVision({ plan, ...sides('NVIDIA H200') });
    const h = HEADLINES.vision!(m);
    expect(h).toMatchObject({ yolov10nBs1LatencyVsCompileCg: 0.9, targetsPassed: '4/7' });
    expect(h.fluxStepVsCompile).toBeCloseTo(1.15, 12);
    expect(h.oursMs).toMatchObject({ 'yolov10n-bs1': 0.9, 'flux_vae-bs1': 120 });
    expect(measuredNothing(HEADLINES.vision!({}))).toBe(true);
  });
});

// ------------------------------------------------------------------------------------------------ the smoke run

/** A Python that imports torch (the CPU PyTorch side runs), else plain python3 (configs only; torch reported absent). */
function python(): { path: string; torch: boolean } {
  for (const p of [process.env.FASTKERNELS_PYTHON, 'python3', '/usr/bin/python3']) {
    if (p && spawnSync(p, ['-c', 'import torch'], { timeout: 120_000 }).status === 0) return { path: p, torch: true };
  }
  return { path: 'python3', torch: false };
}

const Num = z.number().finite();
const RowSchema = z.object({
  id: z.string(), model: z.enum(MODELS as [string, ...string[]]), role: z.enum(['small', 'big']), batch: z.number().int().positive(), dtype: z.enum(['f32', 'f16', 'bf16']),
  flops: z.object({ total: Num, conv: Num, linear: Num, attention: Num }).nullable(),
  ours: z.object({ ms: Num.positive(), iters: z.number().int().min(3), firstCallS: Num, mode: z.enum(['cuda-graph', 'eager']), endToEndMs: Num.optional() }),
  torch: z.object({ eagerMs: Num.positive(), eagerIters: z.number().int(), bestCompileMs: Num.nullable() }).passthrough().nullable(),
  imagesPerS: z.object({ ours: Num, eager: Num.nullable(), compile: Num.nullable(), compileCudagraphs: Num.nullable() }),
  tflops: z.object({ ours: Num.nullable(), eager: Num.nullable(), compile: Num.nullable() }),
  fracMatrix: z.object({ ours: Num.nullable(), compile: Num.nullable() }),
  speedup: z.object({ eager: Num.nullable(), compile: Num.nullable(), compileCudagraphs: Num.nullable(), bestCompile: Num.nullable() }),
  floor: z.object({ gemmMs: Num, attentionMs: Num, sumMs: Num, oursOverSum: Num }).optional(),
});
const VisionJsonSchema = z.object({
  commit: z.string().nullable(), gpu: z.string().nullable(), backend: z.literal('cpu'), torchSkipped: z.string().nullable(),
  settings: z.object({ tiny: z.literal(true), fluxLayers: z.tuple([z.number(), z.number()]), fluxFullDepth: z.boolean() }).passthrough(),
  matrix: z.object({ tflops: Num.nullable() }).passthrough(),
  rows: z.array(RowSchema).length(7),
  targets: z.array(z.object({ id: z.string(), value: Num.nullable(), met: z.boolean().nullable(), verdict: z.enum(['PASS', 'MISS', 'NOT MEASURED']), informative: z.literal(true), why: z.string() }).passthrough()).length(TARGETS.length),
  summary: z.object({ targetsPassed: z.string(), oursMs: z.record(z.string(), Num.nullable()) }).passthrough(),
  errors: z.array(z.object({ model: z.string(), side: z.enum(['ours', 'torch']), error: z.string() }).passthrough()),
});

describe('bench/suites/vision/run.sh --tiny --backend cpu (the whole chain on the CPU)', () => {
  it('configs, init-weights, matrix rates, both sides per model, the merge: vision.json matches its schema', { timeout: 600_000 }, () => {
    const bundle = join(dir, 'bundle');
    mkdirSync(join(bundle, 'bench', 'suites'), { recursive: true });
    symlinkSync(SUITE, join(bundle, 'bench', 'suites', 'vision'));
    // the bundle's launchers: `run` is the built CLI (init-weights), `run-node` this node on the repo's driver
    writeFileSync(join(bundle, 'run'), `#!/bin/sh\nif [ "$1" = --print-node ]; then echo "${process.execPath}"; exit 0; fi\nexec "${process.execPath}" "${BIN}" "$@"\n`);
    writeFileSync(join(bundle, 'run-node'), `#!/bin/sh\nexec "${process.execPath}" "$@"\n`);
    for (const f of ['run', 'run-node']) chmodSync(join(bundle, f), 0o755);
    writeFileSync(join(bundle, 'MANIFEST.json'), '{ "commit": "smoke123" }');
    const py = python();
    const out = join(dir, 'out');
    const r = spawnSync('bash', [join(SUITE, 'run.sh'), '--tiny', '--backend', 'cpu'], {
      encoding: 'utf8', timeout: 580_000, env: { ...process.env, FASTKERNELS_BUNDLE: bundle, OUT: out, PYTHON: py.path, PYTHONDONTWRITEBYTECODE: '1' },
    });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    const doc = VisionJsonSchema.parse(JSON.parse(readFileSync(join(out, 'vision.json'), 'utf8')));
    expect(doc.commit).toBe('smoke123');
    expect(doc.settings.fluxLayers).toEqual([2, 2]);
    expect(doc.settings).toMatchObject({ convAlgoSearch: 'benchmark' }); // run.sh's default, both sides
    expect(doc.rows.map((x) => x.id)).toEqual(['yolov10n-bs1', 'yolov10n-bs2', 'convnextv2_base-bs2', 'flux_transformer-bs1', 'flux_vae-bs1', 'yolov10s-bs1', 'yolov10s-bs2']);
    expect(r.stdout.trim().split('\n').slice(-8, -1).every((l) => l.startsWith('target: '))).toBe(true); // the targets last, then the total
    if (py.torch) {
      expect(doc.torchSkipped).toBeNull();
      expect(doc.errors).toEqual([]);
      for (const row of doc.rows) {
        expect(row.torch?.eagerMs, row.id).toBeGreaterThan(0);
        expect(row.flops?.total, row.id).toBeGreaterThan(0);
      }
      const flux = doc.rows.find((x) => x.model === 'flux_transformer')!;
      expect(flux.floor?.sumMs).toBeGreaterThan(0);
      expect(flux.flops!.attention).toBeGreaterThan(0);
    } else {
      expect(doc.torchSkipped).toMatch(/preflight failed/);
      expect(doc.rows.every((x) => x.torch === null)).toBe(true);
    }
  });
});
