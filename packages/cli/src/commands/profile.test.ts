/**
 * `fastkernels profile` on the CPU with the tiny fixtures (random weights; ConvNeXt-V2 from an init-weights checkpoint):
 * YOLOv10, BGE-M3 / ColBERTv2 and Llama (a prefill step and a decode step of the engine). The report's tasks are
 * exactly those whose forward the model runs (recorded here by a separate instrumented load), the self times and the
 * unattributed rest sum to the profiled forward, inclusive >= self; the table (top rows, "other", the rest);
 * --by-shape; the JSON schema; bad input (not a model folder, an unknown model type, a pipeline, a flag that does not
 * apply, a bad number) is exit 2 with the flag and the fix, no stack trace.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { UserError } from '@fastkernels/core';
import { instrumentRegistry } from '@fastkernels/model-zoo';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../app.js';
import { environment } from '../env.js';
import { ProfileReportSchema, type ProfileReport } from '../profile/report.js';
import { loadLlmWorkload, type LlmPhase } from '../profile/llm-workload.js';
import { loadEncoderWorkload, loadVisionWorkload, type LoadedWorkload } from '../profile/workloads.js';
import { runInitWeights } from './init-weights.js';
import { runProfile, type ProfileArgs } from './profile.js';

const FIXTURES = join(resolve(import.meta.dirname, '../../../..'), 'packages/model-zoo/fixtures');
const YOLO = join(FIXTURES, 'tiny-yolov10');
const BGE = join(FIXTURES, 'tiny-bge-m3');
const COLBERT = join(FIXTURES, 'tiny-colbertv2');
const LLAMA = join(FIXTURES, 'tiny-llama');
const CONVNEXT = join(FIXTURES, 'tiny-convnextv2');
const tmp = mkdtempSync(join(tmpdir(), 'fk-profile-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const base: ProfileArgs = { model: YOLO, backend: 'cpu', dtype: 'f32', warmups: 1, repeats: 2, top: 25, seed: 0, json: true };
function profile(args: Partial<ProfileArgs>): { report: ProfileReport; out: string; err: string } {
  let out = '';
  let err = '';
  const report = runProfile({ ...base, ...args }, { out: (s) => (out += s), err: (s) => (err += s) });
  if (args.json !== false) expect(ProfileReportSchema.parse(JSON.parse(out))).toEqual(report);
  return { report, out, err };
}

/** The tasks whose forward one un-profiled forward of the same workload runs, recorded by a hook of our own. */
function tasksRun(kind: 'vision' | 'encoder' | LlmPhase, dir: string, batch: number, lengths?: [number, number]): string[] {
  const seen = new Set<string>();
  const registry = instrumentRegistry(environment().registry, { onForward: (id, _m, _a, run) => (seen.add(id), run()) }, 'seen');
  const spec = { dir, backend: new CpuBackend(), dtype: 'f32' as const, batch, seed: 0, ...(lengths ? { lengths } : {}) };
  const load = (): LoadedWorkload => {
    if (kind === 'vision') return loadVisionWorkload(spec, registry, false);
    if (kind === 'encoder') return loadEncoderWorkload(spec, registry);
    return loadLlmWorkload({ ...spec, phase: kind, tokens: 12, steps: 2 }, registry, false);
  };
  const w = load();
  try {
    seen.clear(); // the load's own first forward counts the same; start from one clean forward
    w.eager();
  } finally {
    w.dispose();
  }
  return [...seen].sort();
}

function expectConsistent(r: ProfileReport): void {
  const selfSum = r.tasks.reduce((a, t) => a + t.self_ms, 0) + r.unattributed_ms;
  expect(selfSum).toBeCloseTo(r.forward.profiled.mean_ms, 6);
  const shareSum = r.tasks.reduce((a, t) => a + t.self_share, 0) + r.unattributed_share;
  expect(shareSum).toBeCloseTo(1, 6);
  for (const t of r.tasks) {
    expect(t.inclusive_ms).toBeGreaterThanOrEqual(t.self_ms - 1e-6);
    expect(t.ms_per_call).toBeCloseTo(t.inclusive_ms / t.calls, 9);
    expect(Number.isInteger(t.calls)).toBe(true); // every profiled forward runs the same modules
  }
  const selves = r.tasks.map((t) => t.self_ms);
  expect(selves).toEqual([...selves].sort((a, b) => b - a));
  expect(r).toMatchObject({ profiled_graphs: false, timer: 'host clock', backend: 'cpu', forward: { graphs: null }, queue_ahead: null });
}

describe('fastkernels profile (CPU)', () => {
  it('YOLOv10: the tasks the model runs, self times summing to the forward, the un-instrumented times', { timeout: 180_000 }, () => {
    const { report } = profile({ batch: 2 });
    expect(report).toMatchObject({ kind: 'vision', architecture: 'yolov10', dtype: 'f32', weights: 'random', workload: { batch: 2, image_size: 64 }, repeats: 2, warmups: 1, by_shape: false });
    expect(report.tasks.map((t) => t.task).sort()).toEqual(tasksRun('vision', YOLO, 2));
    expect(report.tasks.map((t) => t.task)).toContain('L1/conv2d');
    expectConsistent(report);
    expect(report.forward.eager.runs).toBe(2);
    expect(report.forward.graphs_note).toMatch(/no CUDA graphs/);
    // the heaviest task on the CPU is the convolution
    expect(report.tasks[0]!.task).toBe('L1/conv2d');
  });

  it('ConvNeXt-V2 from an init-weights checkpoint: a classifier forward (logits), the checkpoint loaded', { timeout: 120_000 }, () => {
    const ckpt = join(tmp, 'convnext-ckpt');
    runInitWeights({ config: join(CONVNEXT, 'config.json'), out: ckpt, seed: 1, dtype: 'f32', backend: 'cpu' }, { out: () => {}, err: () => {} });
    const { report } = profile({ model: ckpt, batch: 2 });
    expect(report).toMatchObject({ kind: 'vision', architecture: 'convnextv2', weights: 'checkpoint', workload: { batch: 2 } });
    expect(report.workload.description).toMatch(/2 images at \d+x\d+, the vision runner's device forward \(logits\)/);
    expect(report.tasks.map((t) => t.task).sort()).toEqual(tasksRun('vision', ckpt, 2));
    expect(report.tasks.map((t) => t.task)).toContain('L2/convnextv2_block');
    expectConsistent(report);
  });

  it('BGE-M3 and ColBERTv2: one packed forward of the batch; the tasks the model runs', { timeout: 120_000 }, () => {
    for (const dir of [BGE, COLBERT]) {
      const { report } = profile({ model: dir, batch: 3, lengths: '5-20' });
      expect(report).toMatchObject({ kind: 'encoder', workload: { batch: 3, lengths: [5, 20] } });
      expect(report.workload.tokens).toBeGreaterThanOrEqual(15);
      expect(report.workload.description).toMatch(/3 sequences of U\[5, 20\] tokens \(\d+ in all\) in one packed varlen forward/);
      expect(report.forward.graphs_note).toMatch(/captures no CUDA graphs/);
      expect(report.tasks.map((t) => t.task).sort()).toEqual(tasksRun('encoder', dir, 3, [5, 20]));
      expect(report.tasks.map((t) => t.task)).toContain('L1/flash_attn_varlen');
      expectConsistent(report);
    }
  });

  it('Llama: one prefill step of --tokens and one decode step of --batch sequences; the tasks each runs', { timeout: 120_000 }, () => {
    const pre = profile({ model: LLAMA, phase: 'prefill', tokens: 12, batch: undefined }).report;
    expect(pre).toMatchObject({ kind: 'llm', architecture: 'llama', workload: { batch: 1, phase: 'prefill', prompt_tokens: 12, tokens: 12 } });
    expect(pre.workload.description).toMatch(/one engine step prefilling 1 sequence of 12 tokens/);
    expect(pre.forward.graphs_note).toMatch(/prefills eagerly/);
    expect(pre.tasks.map((t) => t.task).sort()).toEqual(tasksRun('prefill', LLAMA, 1));
    expect(pre.tasks.map((t) => t.task)).toContain('L1/varlen_prefill_attention');
    expectConsistent(pre);
    const dec = profile({ model: LLAMA, phase: 'decode', tokens: 12, batch: 3 }).report;
    expect(dec).toMatchObject({ kind: 'llm', workload: { batch: 3, phase: 'decode', prompt_tokens: 12, tokens: 3 } });
    expect(dec.tasks.map((t) => t.task).sort()).toEqual(tasksRun('decode', LLAMA, 3));
    expect(dec.tasks.map((t) => t.task)).toContain('L1/paged_decode_attention');
    expect(dec.tasks.find((t) => t.task === 'L4/llama')!.calls).toBe(1);
    expectConsistent(dec);
  });

  it('--by-shape: a row per task and input shapes, the same totals per task', () => {
    const { report } = profile({ model: BGE, batch: 2, lengths: '6-6', byShape: true, repeats: 1 });
    expectConsistent(report);
    const linear = report.tasks.filter((t) => t.task === 'L1/linear');
    expect(linear.length).toBeGreaterThan(1);
    expect(new Set(linear.map((t) => t.shape)).size).toBe(linear.length);
    expect(linear.map((t) => t.shape)).toContain('12x32 | w 32x32'); // 2 x 6 packed tokens, hidden 32: a square projection
  });

  it('the table: eager and forward times, the top rows by self time, "other", outside modules, total; --out the JSON', { timeout: 180_000 }, () => {
    const file = join(tmp, 'sub', 'yolo.json');
    const { out, report } = profile({ batch: 1, json: false, top: 3, out: file });
    expect(ProfileReportSchema.parse(JSON.parse(readFileSync(file, 'utf8')))).toEqual(report);
    expect(out).toMatch(/tiny-yolov10: yolov10 \(vision\), f32, random weights, on .* \(cpu\)/);
    expect(out).toMatch(/one forward: 1 image at 64x64/);
    expect(out).toMatch(/profiled EAGERLY \(CUDA graphs off\)/);
    expect(out).toMatch(/forward {2}profiled [\d.]+ ms \(min [\d.]+\) {2}\| {2}un-instrumented eager [\d.]+ ms .*\| {2}graphs - \(the cpu backend has no CUDA graphs\)/);
    expect(out).toMatch(/profiling overhead: the profiled forward takes [\d.]+x/);
    const lines = out.split('\n');
    const header = lines.findIndex((l) => /^ {2}task +calls +incl ms +self ms +self % +ms\/call +host self ms$/.test(l));
    expect(header).toBeGreaterThan(0);
    expect(lines[header + 2]).toMatch(/^ {2}L1\/conv2d +\d+ /);
    expect(lines[header + 5]).toMatch(/^ {2}other \(\d+ rows\) /);
    expect(lines[header + 6]).toMatch(/^ {2}\(outside modules\) +- +- /);
    expect(lines[header + 7]).toMatch(/^ {2}total .* 100\.0%/);
    expect(out).toMatch(/runsOwnForward/);
  });

  describe('bad input: exit 2, the flag and the fix, no stack trace', () => {
    const run = async (...args: string[]) => {
      let err = '';
      const code = await main(['profile', ...args], { out: () => {}, err: (s) => (err += s) });
      expect(err).not.toMatch(/\n\s+at /);
      return { code, err };
    };
    it('not a model folder, an unknown model type, a causal LM', async () => {
      const empty = join(tmp, 'empty');
      mkdirSync(empty);
      expect(await run('--model', empty)).toMatchObject({ code: 2, err: expect.stringMatching(/--model: no config.json in .*empty\nfix: /) });
      const odd = join(tmp, 'odd');
      mkdirSync(odd);
      writeFileSync(join(odd, 'config.json'), JSON.stringify({ model_type: 'nope', architectures: ['NopeModel'] }));
      expect(await run('--model', odd, '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/no registered model reads .*'nope' in .*odd\/config.json\nfix: registered: /) });
      expect(await run('--model', join(FIXTURES, 'tiny-flux'), '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--model: .*tiny-flux is a diffusers pipeline \(model_index.json\).*\nfix: /) });
    });
    it('a flag that does not apply, bad numbers, an unknown flag', async () => {
      expect(await run('--model', YOLO, '--lengths', '8-9', '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--lengths: does not apply to a vision model \(yolov10\).*\nfix: drop --lengths/) });
      expect(await run('--model', YOLO, '--batch', '0', '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--batch: must be an integer from 1 to 1024, got 0\nfix: pass --batch N/) });
      expect(await run('--model', BGE, '--batch', '300', '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--batch: must be an integer from 1 to 256/) });
      expect(await run('--model', BGE, '--lengths', '9-3', '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--lengths: expected LO-HI or U\[LO, HI\]/) });
      expect(await run('--model', YOLO, '--repeats', '0', '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--repeats: must be an integer from 1/) });
      expect(await run('--model', YOLO, '--out', tmp, '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--out: .* is a folder\nfix: pass a file name/) });
      expect(await run('--model', YOLO, '--size', '3')).toMatchObject({ code: 2, err: expect.stringMatching(/Unknown argument: size/) });
      expect(await run('--model', YOLO, '--queue-ahead', '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--queue-ahead: does not apply to a vision model on cpu: the cpu backend runs every op before it returns.*\nfix: drop --queue-ahead/) });
      expect(await run('--model', YOLO, '--phase', 'decode', '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--phase: does not apply to a vision model \(yolov10\)\nfix: drop --phase/) });
      expect(await run('--model', BGE, '--tokens', '8', '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--tokens: does not apply to an encoder model \(bge-m3\)\nfix: drop --tokens: pass --lengths/) });
      expect(await run('--model', LLAMA, '--lengths', '3-4', '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--lengths: does not apply to a causal LM \(llama\)\nfix: drop --lengths: pass --tokens/) });
      expect(await run('--model', LLAMA, '--phase', 'prefill', '--batch', '3', '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--batch: does not apply to --phase prefill.*\nfix: drop --batch, or pass --phase decode/) });
      expect(await run('--model', LLAMA, '--tokens', '300', '--backend', 'cpu')).toMatchObject({ code: 2, err: expect.stringMatching(/--tokens: 300 tokens and \d+ generated exceed the model's 256 positions \(max_position_embeddings\)\nfix: pass --tokens \d+ or less/) });
    });
    it('runProfile throws UserErrors naming the flag', () => {
      expect(() => runProfile({ ...base, top: 0 }, { out: () => {}, err: () => {} })).toThrow(UserError);
    });
  });
});
