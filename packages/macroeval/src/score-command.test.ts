import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UserError } from '@fastkernels/core';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEMO_E2E_FILES, DEMO_KERNEL_FILES } from './demo.js';
import { LeaderboardSchema, type Leaderboard } from './leaderboard-schema.js';
import { runLeaderboard } from './leaderboard-command-core.js';
import { parseFileSpec, runScore } from './score-command-core.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures');
const fx = (name: string) => join(FIXTURES, name);
const DEMO_KERNEL = DEMO_KERNEL_FILES.map(fx);
const DEMO_E2E = DEMO_E2E_FILES.map(fx);

const tmp = () => mkdtempSync(join(tmpdir(), 'fk-score-'));

function userError(f: () => unknown): UserError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(UserError);
    return e as UserError;
  }
  throw new Error('expected a UserError');
}

describe('fastkernels score', () => {
  let board: Leaderboard;
  let dir: string;
  beforeAll(() => {
    dir = tmp();
    board = runScore({ kernel: DEMO_KERNEL, e2e: DEMO_E2E, out: join(dir, 'out', 'leaderboard.json'), generatedAt: '2026-11-30T00:00:00.000Z' }).board;
  });

  it('writes a schema_version 1 board that reads back through its schema', () => {
    const text = readFileSync(join(dir, 'out', 'leaderboard.json'), 'utf8');
    const back = LeaderboardSchema.parse(JSON.parse(text));
    expect(back.schema_version).toBe(1);
    expect(back.generated_at).toBe('2026-11-30T00:00:00.000Z');
    expect(back.universe).toMatchObject({ n_models: 11, n_families: 8 });
    expect(back.environment.macroeval_config.tau).toBe(0.9);
    expect(back.environment.gpu).toBe('synthetic demo data (not a measurement)');
  });

  it('merges agents and modes into entries, e2e entries first by Score', () => {
    const rows = board.boards.agents.rows;
    expect(rows.map((r) => `${r.agent}/${r.mode}`)).toEqual(['Atlas/seq', 'Atlas/ind', 'Borealis/ind', 'Atlas/comp']);
    const scores = rows.filter((r) => r.e2e).map((r) => r.e2e!.deployable.score.blend);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    expect(rows.find((r) => r.mode === 'comp')!.e2e).toBeNull();
    expect(board.agent_info.atlas).toMatchObject({ name: 'Atlas', modes: ['seq', 'ind', 'comp'] });
    expect(board.targets_per_level).toEqual({ 1: 12, 2: 8, 3: 4 });
  });

  it('fills the kernel, composition, e2e, drops, per-model and sensitivity blocks', () => {
    const row = board.boards.agents.rows.find((r) => r.agent === 'Atlas' && r.mode === 'ind')!;
    expect(Object.keys(row.kernel!)).toEqual(['L1', 'L2', 'L3', 'all']);
    expect(Object.keys(row.composition)).toEqual(expect.arrayContaining(['ind_to_comp_L2', 'ind_to_comp_L3', 'comp_to_seq_L2', 'comp_to_seq_L3']));
    const e2e = row.e2e!;
    expect(e2e.per_model).toHaveLength(11);
    expect(e2e.per_model.find((m) => m.label === 'YOLOv10n')).toMatchObject({ outcome: 'incomplete', valid: false, C: 0 });
    expect(e2e.drops.requested).toBeGreaterThan(0);
    expect(e2e.drops.kept! + Object.values(e2e.drops.dropped_by_category).reduce((a, b) => a + b, 0)).toBe(e2e.drops.requested);
    expect(Object.keys(e2e.sensitivity)).toEqual(['0.5x', '1x', '2x']);
    expect(e2e.sensitivity['1x']).toMatchObject({ score: e2e.deployable.score.blend, of: 3 });
    expect(e2e.all_winners).not.toBeNull();
    expect(e2e.all_winners!.score.blend).toBeLessThanOrEqual(e2e.deployable.score.blend);
  });

  it('records provenance: SHA-256 of every input, the commit, versions', () => {
    const row = board.boards.agents.rows.find((r) => r.agent === 'Borealis')!;
    const file = row.provenance.e2e_files[0]!;
    expect(file.sha256).toBe(createHash('sha256').update(readFileSync(file.path)).digest('hex'));
    expect(row.provenance.kernel_files.map((f) => f.path)).toEqual([fx('kernel-borealis-ind.json')]);
    expect(board.generated_by.commit === null || /^[0-9a-f]{40}$/.test(board.generated_by.commit)).toBe(true);
    expect(board.environment.versions).toMatchObject({ fastkernels: '0.1.0', cuda: '13.0' });
  });

  it('ties a file to its entry by an AGENT:MODE= prefix, and reads the minimal kernel format', () => {
    expect(parseFileSpec('KDA:ind=runs/k.json')).toEqual({ agent: 'KDA', mode: 'ind', path: 'runs/k.json' });
    expect(parseFileSpec('/abs/k.json')).toEqual({ path: '/abs/k.json' });
    const d = tmp();
    const k = join(d, 'k.json');
    writeFileSync(k, JSON.stringify({ results: [{ task: 'L1/rms_norm', status: 'PASSED', speedup: 1.5 }, { task: 'L2/mlp', level: 2, status: 'RUNTIME_ERROR', speedup: null }] }));
    const b = runScore({ kernel: [`Solo:independent=${k}`], e2e: [], out: join(d, 'lb.json') }).board;
    expect(b.boards.agents.rows[0]).toMatchObject({ agent: 'Solo', mode: 'ind', e2e: null, kernel: { L1: { correct: 1, geomean: 1.5 }, L2: { benched: 1, correct: 0 } } });
  });

  it('as-is results are unknown (null) when a model had drops and no as-is run', () => {
    const d = tmp();
    const e = join(d, 'e.json');
    writeFileSync(e, JSON.stringify({ agent: 'A', mode: 'ind', models: [{ model: 'm', family: 'llm', outcome: 'ok', throughputSpeedup: 1.1, discrepancies: [0], drops: [{ task: 'L1/x', category: 'compile' }] }] }));
    const b = runScore({ kernel: [], e2e: [e], out: join(d, 'lb.json') }).board;
    expect(b.boards.agents.rows[0]!.e2e).toMatchObject({ all_winners: null, drops: { requested: null, dropped_unique_kernels: 1, dropped_by_category: { compile: 1 } } });
  });

  describe('bad input names the file, the field and the fix', () => {
    const d = tmp();
    const out = join(d, 'lb.json');
    it('a missing file', () => {
      const e = userError(() => runScore({ kernel: [join(d, 'nope.json')], e2e: [], out }));
      expect(e.details.file).toBe(join(d, 'nope.json'));
      expect(e.describe()).toMatch(/file not found[\s\S]*fix: /);
    });
    it('malformed JSON', () => {
      const p = join(d, 'bad.json');
      writeFileSync(p, '{"models": [');
      const e = userError(() => runScore({ kernel: [], e2e: [p], out }));
      expect(e.details).toMatchObject({ file: p, field: '(json)' });
    });
    it('a wrong schema: the field path of the first problem', () => {
      const p = join(d, 'wrong.json');
      writeFileSync(p, JSON.stringify({ agent: 'A', mode: 'ind', models: [{ model: 'm', family: 'llm', outcome: 'exploded' }] }));
      const e = userError(() => runScore({ kernel: [], e2e: [p], out }));
      expect(e.details).toMatchObject({ file: p, field: 'models[0].outcome' });
      expect(e.details.fix).toMatch(/fastkernels e2e/);
    });
    it('a bench report that breaks core\'s BenchReportSchema', () => {
      const p = join(d, 'bench.json');
      const report = JSON.parse(readFileSync(DEMO_KERNEL[0]!, 'utf8'));
      report.results[2].status = 'MAYBE';
      writeFileSync(p, JSON.stringify(report));
      const e = userError(() => runScore({ kernel: [p], e2e: [], out }));
      expect(e.details).toMatchObject({ file: p, field: 'results[2].status' });
    });
    it('a file that does not say whose it is', () => {
      const p = join(d, 'anon.json');
      writeFileSync(p, JSON.stringify({ results: [{ task: 'L1/a', status: 'PASSED', speedup: 1 }] }));
      const e = userError(() => runScore({ kernel: [p], e2e: [], out }));
      expect(e.details).toMatchObject({ file: p, field: 'agent' });
      expect(e.details.fix).toContain(`KDA:ind=${p}`);
    });
    it('a bad config', () => {
      const p = join(d, 'cfg.json');
      writeFileSync(p, JSON.stringify({ tau: 2 }));
      const e = userError(() => runScore({ kernel: DEMO_KERNEL.slice(0, 1), e2e: [], out, config: p }));
      expect(e.details).toMatchObject({ file: p, field: 'tau' });
    });
    it('nothing to score', () => {
      expect(userError(() => runScore({ kernel: [], e2e: [], out })).details.field).toBe('--kernel / --e2e');
    });
  });
});

describe('fastkernels leaderboard', () => {
  it('writes Markdown and HTML from a board', () => {
    const d = tmp();
    runScore({ kernel: DEMO_KERNEL, e2e: DEMO_E2E, out: join(d, 'lb.json') });
    const res = runLeaderboard({ in: join(d, 'lb.json'), out: join(d, 'site') });
    const md = readFileSync(res.markdown, 'utf8');
    expect(md).toContain('## End-to-end MacroEval');
    expect(md).toMatch(/\| 1 \| Atlas \| Sequential \| 0\.\d{3} \|/);
    expect(md).toContain('## Kernel level');
    expect(md).toContain('ind_to_comp_L2');
    const html = readFileSync(res.html, 'utf8');
    expect(html).not.toMatch(/<script[^>]+src=|<link[^>]+href=|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    expect(html).toContain('<svg');
  });

  it('rejects a file that is not a board', () => {
    const d = tmp();
    writeFileSync(join(d, 'x.json'), JSON.stringify({ schema_version: 2 }));
    const e = userError(() => runLeaderboard({ in: join(d, 'x.json'), out: join(d, 'site') }));
    expect(e.details).toMatchObject({ file: join(d, 'x.json'), field: 'schema_version' });
  });
});
