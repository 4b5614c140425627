import { chmodSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BenchReportSchema } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { DEMO, STACK, cli, tempSet } from './helpers.js';

const GOOD_RMS = `import { Module, type Tensor } from '@fastkernels/core';
export class RMSNorm extends Module {
  readonly weight: Tensor;
  constructor(readonly hiddenSize: number, readonly eps = 1e-6) {
    super();
    this.weight = this.parameter('weight', [hiddenSize]);
  }
  forward(x: Tensor, residual?: Tensor | null) {
    const ops = this.ctx.backend.ops;
    return residual ? ops.fusedAddRmsNorm(x, residual, this.weight, this.eps) : ops.rmsNorm(x, this.weight, this.eps);
  }
}
`;

/** Every bad input: exit 2, a short message naming the file or field and the fix, no stack trace. */
function expectBadInput(args: string[], ...mentions: (string | RegExp)[]) {
  const r = cli(args);
  expect(r.code, r.stderr + r.stdout).toBe(2);
  expect(r.stderr).toMatch(/^fastkernels: error: /);
  expect(r.stderr).toMatch(/fix: /);
  for (const m of mentions) expect(r.stderr).toMatch(m);
  expect(r.stderr).not.toMatch(STACK);
  expect(r.stderr.split('\n').length).toBeLessThan(12);
  return r;
}

describe('bad candidate files', () => {
  it('a file that does not parse: file:line and the fix', () => {
    const dir = tempSet({ 'L1/rms_norm.ts': `import { Module } from '@fastkernels/core';\nexport class RMSNorm extends Module {\n  forward(x {\n  }\n}\n` });
    expectBadInput(['bench', '--candidates', dir], /L1\/rms_norm\.ts: does not parse: .*rms_norm\.ts:3:\d+/, /syntax error/);
  });

  it('no export of the baseline class name', () => {
    const dir = tempSet({ 'L1/rms_norm.ts': GOOD_RMS.replace('class RMSNorm', 'class RmsNorm') });
    expectBadInput(['bench', '--candidates', dir], /L1\/rms_norm\.ts: no export named 'RMSNorm' \(it exports RmsNorm\)/, /export class RMSNorm extends Module/);
  });

  it('a constructor with another arity', () => {
    const dir = tempSet({ 'L1/rms_norm.ts': GOOD_RMS.replace('readonly eps = 1e-6)', 'readonly eps: number, extra: number)') });
    expectBadInput(['bench', '--candidates', dir], /L1\/rms_norm\.ts: class RMSNorm: constructor takes 3 required parameters, the baseline takes 1 to 2/, /constructor\(hiddenSize, eps = <default>\)/);
  });

  it('a forward with too many parameters', () => {
    const dir = tempSet({ 'L1/rms_norm.ts': GOOD_RMS.replace('forward(x: Tensor, residual?: Tensor | null)', 'forward(x: Tensor, residual: Tensor | null, scale: number)') });
    expectBadInput(['bench', '--candidates', dir], /forward takes 3 parameters, the task passes 2/);
  });

  it('a class that does not extend Module', () => {
    const dir = tempSet({ 'L1/silu_and_mul.ts': 'export class SiluAndMul { forward(x) { return x; } }\n' });
    expectBadInput(['bench', '--candidates', dir], /L1\/silu_and_mul\.js|L1\/silu_and_mul\.ts: class SiluAndMul does not extend Module/);
  });

  it('a file named after no task, with the nearest task id', () => {
    const dir = tempSet({ 'L1/rms_nrom.ts': GOOD_RMS });
    expectBadInput(['bench', '--candidates', dir], /L1\/rms_nrom\.ts: no task L1\/rms_nrom/, /rename it to L1\/rms_norm\.ts/);
  });

  it('an import the CLI does not provide', () => {
    const dir = tempSet({ 'L1/rms_norm.ts': `import '@fastkernels/nope';\n${GOOD_RMS}` });
    expectBadInput(['bench', '--candidates', dir], /cannot be bundled: .*@fastkernels\/nope/);
  });

  it('--keep-going turns load failures into RUNTIME_ERROR rows and benches the rest', () => {
    const dir = tempSet({ 'L1/rms_norm.ts': GOOD_RMS, 'L1/silu_and_mul.ts': 'export const x = ;\n' });
    const r = cli(['bench', '--candidates', dir, '--keep-going', '--iters', '3', '--warmup-ms', '0', '--json']);
    expect(r.code).toBe(0);
    const report = BenchReportSchema.parse(JSON.parse(r.stdout));
    expect(report.results.find((x) => x.task === 'L1/silu_and_mul')).toMatchObject({ status: 'RUNTIME_ERROR', case: 'load' });
    expect(report.results.find((x) => x.task === 'L1/silu_and_mul')!.detail).toMatch(/failed to load: does not parse/);
    expect(report.results.filter((x) => x.task === 'L1/rms_norm').every((x) => x.status === 'PASSED')).toBe(true);
  });

  it('several bad files are listed together', () => {
    const dir = tempSet({ 'L1/rms_norm.ts': 'export const = 1;\n', 'L1/softmax.ts': 'export class X {}\n' });
    expectBadInput(['bench', '--candidates', dir], /2 candidate files failed to load/, /rms_norm\.ts: does not parse/, /softmax\.ts: no export named 'Softmax'/);
  });
});

describe('bad folders, task ids and flags', () => {
  it('a folder that does not exist', () => {
    expectBadInput(['bench', '--candidates', 'no/such/folder'], /no\/such\/folder: --candidates: no such folder/);
  });

  it('a file where a folder is expected', () => {
    expectBadInput(['bench', '--candidates', 'package.json'], /package\.json: --candidates: is a file, not a folder/);
  });

  it.skipIf(process.getuid?.() === 0)('an unreadable folder', () => {
    const dir = tempSet({ 'L1/rms_norm.ts': GOOD_RMS });
    chmodSync(join(dir, 'L1'), 0o000);
    try {
      expectBadInput(['bench', '--candidates', dir], /cannot read the folder \(EACCES\)/);
    } finally {
      chmodSync(join(dir, 'L1'), 0o755);
    }
  });

  it('a folder with no candidates', () => {
    expectBadInput(['bench', '--candidates', tempSet({ 'README.md': 'hi' })], /holds no candidate files/, /L<level>\/<task stem>\.ts/);
  });

  it('an unknown task id (bench --task, info, stubs --task)', () => {
    expectBadInput(['bench', '--candidates', DEMO, '--task', 'rms_nrom'], /--task: unknown task 'rms_nrom'/, /did you mean rms_norm/);
    expectBadInput(['info', 'L1/nope'], /unknown task 'L1\/nope'/, /`node packages\/cli\/dist\/bin\.js list`/); // hints name the CLI as run
    expectBadInput(['stubs', '--out', tempSet(), '--task', 'L9/x'], /--task: unknown task 'L9\/x'/);
  });

  it('a task stem two levels share (qwen3_moe is an L2 block and the L4 model): both ids named', () => {
    expectBadInput(['info', 'qwen3_moe'], /task 'qwen3_moe' is ambiguous: L2\/qwen3_moe, L4\/qwen3_moe/, /give the full id, e\.g\. L2\/qwen3_moe/);
  });

  it('a task the set has no candidate for', () => {
    expectBadInput(['bench', '--candidates', DEMO, '--task', 'softmax'], /has no candidate for L1\/softmax/);
  });

  it('flags out of range name the flag and the range', () => {
    expectBadInput(['bench', '--candidates', DEMO, '--rounds', '1'], /--rounds: must be an integer from 3 to 1000, got 1/);
    expectBadInput(['bench', '--candidates', DEMO, '--iters', '-4'], /--iters: must be an integer from 0 to 100000/);
    expectBadInput(['bench', '--candidates', DEMO, '--iters', '2.5'], /--iters: must be an integer/);
    expectBadInput(['list', '--level', '7'], /--level: must be an integer from 1 to 4, got 7/);
    expectBadInput(['bench', '--candidates', DEMO, '--backend', 'tpu'], /Invalid values:[\s\S]*backend/);
    expectBadInput(['bench', '--candidates', DEMO, '--backend', 'cuda'], /--backend: backend 'cuda' is not/, /--backend cpu|doctor/);
    expectBadInput(['bench'], /missing --candidates|Missing required argument: candidates/);
    expectBadInput(['list', '--bogus'], /Unknown argument: bogus/);
  });

  it('an unwritable --json path fails before any work', () => {
    expectBadInput(['bench', '--candidates', DEMO, '--json', 'package.json/report.json'], /package\.json\/report\.json: --json: cannot write the report/);
  });

  it('--verbose adds the stack trace', () => {
    const r = cli(['bench', '--candidates', 'no/such/folder', '--verbose']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(STACK);
  });
});

describe('results already computed are written before exiting', () => {
  it('an interrupted run (Ctrl-C) keeps the finished tasks in the --json report and exits 130', () => {
    const dir = tempSet({
      // The first task benched sends the process a SIGINT, as a user pressing Ctrl-C would.
      'L1/embedding.ts': `import { Module, type Tensor } from '@fastkernels/core';
let sent = false;
export class VocabParallelEmbedding extends Module {
  readonly weight: Tensor;
  constructor(readonly numEmbeddings: number, readonly embeddingDim: number) {
    super();
    this.weight = this.parameter('weight', [numEmbeddings, embeddingDim]);
  }
  forward(ids: Tensor): Tensor {
    // candidates run in a worker process: signal the CLI (its parent), as Ctrl-C in the terminal would
    if (!sent) { sent = true; process.kill(process.ppid, 'SIGINT'); }
    return this.ctx.backend.ops.embedding(ids, this.weight);
  }
}
`,
      'L1/rms_norm.ts': GOOD_RMS,
    });
    const file = join(dir, 'report.json');
    const r = cli(['bench', '--candidates', dir, '--iters', '3', '--warmup-ms', '0', '--json', file]);
    expect(r.code).toBe(130);
    expect(r.stderr).toMatch(/interrupted after 1 of 2 tasks/);
    expect(existsSync(file)).toBe(true);
    const report = BenchReportSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
    expect(report.complete).toBe(false);
    expect(report.error).toMatch(/interrupted/);
    expect(report.results.length).toBeGreaterThan(0);
    expect(report.results.every((x) => x.task === 'L1/embedding' && x.status === 'PASSED')).toBe(true);
  });
});

describe('bad settings in the environment (core/settings.ts: read when a command needs them)', () => {
  for (const [name, value, want] of [
    ['FASTKERNELS_NCCL_TIMEOUT_MS', 'soon', /FASTKERNELS_NCCL_TIMEOUT_MS: expected a whole number >= 1, got 'soon'/],
    ['FASTKERNELS_CHECK_INDICES', 'yes', /FASTKERNELS_CHECK_INDICES: expected 0 or 1, got 'yes'/],
  ] as const) {
    it(`${name}=${value}: doctor exits 2 with the variable, what it accepts and the fix, no stack trace`, () => {
      const r = cli(['doctor'], { env: { [name]: value } });
      expect(r.code, r.stderr + r.stdout).toBe(2);
      expect(r.stderr).toMatch(/^fastkernels: error: /);
      expect(r.stderr).toMatch(want);
      expect(r.stderr).toMatch(/fix: set /);
      expect(r.stderr).not.toMatch(STACK);
    });
  }
  it('a command that does not read the setting is not stopped by it (nothing is read at import)', () => {
    const r = cli(['list'], { env: { FASTKERNELS_NCCL_TIMEOUT_MS: 'soon' } });
    expect(r.code, r.stderr).toBe(0);
  });
  it('a removed per-knob tuning variable is an error naming its tuning key (an A/B run must not measure the default)', () => {
    const r = cli(['tuning', 'show'], { env: { FASTKERNELS_GEMV_MAX_ROWS: '0' } });
    expect(r.code, r.stderr + r.stdout).toBe(2);
    expect(r.stderr).toMatch(/FASTKERNELS_GEMV_MAX_ROWS is no longer read/);
    expect(r.stderr).toMatch(/tuning derive --set linear\.gemvMaxRows=0/);
    expect(r.stderr).not.toMatch(STACK);
  });
});
