import { LAMBDA_KEYS } from './config.js';
import { asIsText, compositionKeys, entryName, fmt, fmtX, keptText, levelKeys, sensitivityText, validText } from './format.js';
import type { Leaderboard, LeaderboardRow } from './leaderboard-schema.js';

/** The board as Markdown: the end-to-end board, the kernel-level board, composition, families, models. */
export function renderMarkdown(board: Leaderboard): string {
  const rows = board.boards.agents.rows;
  const e2eRows = rows.filter((r) => r.e2e);
  const out: string[] = [];
  const env = board.environment;
  out.push('# FastKernels leaderboard', '');
  out.push(
    `Generated ${board.generated_at} by ${board.generated_by.tool} ${board.generated_by.version}` +
      (board.generated_by.commit ? ` (commit \`${board.generated_by.commit.slice(0, 12)}\`)` : '') +
      `; GPU: ${env.gpu ?? 'unknown'}${env.gpu_count ? ` ×${env.gpu_count}` : ''}.`,
    '',
  );
  out.push(`Score = ${board.metric.score}; λ = ${board.metric.lambda} (blend), τ = ${board.metric.tau}. ${board.metric.note}`, '');
  out.push(`Universe: ${board.universe.n_models} models in ${board.universe.n_families} families (${board.universe.families.join(', ')}).`, '');

  out.push('## End-to-end MacroEval (deployable subsets)', '');
  if (e2eRows.length === 0) out.push('No entry has end-to-end results.', '');
  else {
    const scales = Object.keys(e2eRows[0]!.e2e!.sensitivity);
    out.push(
      table(
        ['Rank', 'Agent', 'Mode', 'Score', 'Score thr', 'Score lat', 'S_macro', 'Thr', 'Lat', 'C_macro', 'Cov_macro', 'Valid', 'As-is', 'Kept', `Rank at ${scales.join('/')}`],
        e2eRows.map((r, i) => {
          const d = r.e2e!.deployable;
          return [String(i + 1), r.agent, r.mode_label, fmt(d.score.blend), fmt(d.score.thr), fmt(d.score.lat), fmt(d.S_macro.blend), fmt(d.S_macro.thr), fmt(d.S_macro.lat), fmt(d.C_macro), fmt(d.coverage_macro), validText(r), asIsText(r), keptText(r), sensitivityText(r)];
        }),
        'lllrrrrrrrrrrrr',
      ),
      '',
    );
  }

  const levels = levelKeys(rows);
  const kernelRows = rows.filter((r) => r.kernel);
  if (kernelRows.length) {
    out.push('## Kernel level', '', 'Correct = correct on every case; Geo = geometric mean of per-op speedups over correct ops; winners = correct and ≥ 1.0x.', '');
    const head = ['Agent', 'Mode'];
    for (const l of levels) head.push(`${l} corr`, `${l} geo`);
    head.push('All geo', 'fast_1', 'fast_2', 'Winners');
    out.push(
      table(
        head,
        kernelRows.map((r) => {
          const cells = [r.agent, r.mode_label];
          for (const l of levels) {
            const s = r.kernel![l];
            cells.push(s ? `${s.correct}/${s.benched}` : '—', fmtX(s?.geomean));
          }
          const all = r.kernel!.all!;
          cells.push(fmtX(all.geomean), String(all.fast_1), String(all.fast_2), String(all.winners));
          return cells;
        }),
        'll' + 'rr'.repeat(levels.length) + 'rrrr',
      ),
      '',
    );
  }

  const compKeys = compositionKeys(rows);
  if (compKeys.length) {
    out.push('## Composition', '', 'Ratio of level geomeans paired over ops correct in both modes (n), and winners that broke once composed.', '');
    const seen = new Set<string>();
    const agents = rows.filter((r) => Object.keys(r.composition).length && !seen.has(r.agent_key) && seen.add(r.agent_key));
    out.push(
      table(
        ['Agent', ...compKeys],
        agents.map((r) => [r.agent, ...compKeys.map((k) => {
          const c = r.composition[k];
          return c ? `${fmt(c.ratio, 2)} (n=${c.n}, broke ${c.broke})` : '—';
        })]),
        'l' + 'r'.repeat(compKeys.length),
      ),
      '',
    );
  }

  if (e2eRows.length) {
    out.push('## Per family (λ = blend)', '', 'S_f (C_f, coverage_f); — where no model of the family is valid.', '');
    out.push(
      table(
        ['Entry', ...board.universe.families],
        e2eRows.map((r) => [entryName(r), ...board.universe.families.map((f) => {
          const s = r.e2e!.deployable.families[f];
          return s ? `${fmt(s.S_f.blend)} (${fmt(s.C_f)}, ${fmt(s.coverage_f, 2)})` : '—';
        })]),
        'l' + 'r'.repeat(board.universe.families.length),
      ),
      '',
    );
    out.push('## Per model', '');
    for (const r of e2eRows) out.push(...perModel(r), '');
  }

  if (board.known_gaps.length) out.push('## Known gaps', '', ...board.known_gaps.map((g) => `- ${g}`), '');
  out.push('## Inputs', '');
  for (const r of rows) {
    for (const f of [...r.provenance.kernel_files, ...r.provenance.e2e_files]) out.push(`- ${entryName(r)}: \`${f.path}\` sha256 \`${f.sha256}\``);
  }
  out.push('');
  return out.join('\n');
}

function perModel(r: LeaderboardRow): string[] {
  return [
    `### ${entryName(r)}`,
    '',
    table(
      ['Model', 'Family', 'Outcome', 'Valid', 'C', ...LAMBDA_KEYS.map((k) => `s ${k}`), 'mean d', 'g', 'Dropped', 'As-is'],
      r.e2e!.per_model.map((m) => [
        m.label,
        m.family,
        m.detail && m.outcome !== 'ok' ? `${m.outcome} (${m.detail})` : m.outcome,
        m.valid ? 'yes' : 'no',
        fmt(m.C),
        ...LAMBDA_KEYS.map((k) => fmt(m.s?.[k])),
        fmt(m.mean_d, 4),
        fmt(m.g, 4),
        String(m.n_dropped),
        m.as_is ? `${m.as_is.outcome}${m.as_is.valid ? ', valid' : ''}` : '—',
      ]),
      'lllrrrrrrrrl',
    ),
  ];
}

function escapeCell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** A GitHub table; `align` gives l or r per column. */
export function table(head: readonly string[], rows: ReadonlyArray<readonly string[]>, align = ''): string {
  const sep = head.map((_, i) => (align[i] === 'r' ? '---:' : '---'));
  return [head, sep, ...rows].map((cells) => `| ${cells.map(escapeCell).join(' | ')} |`).join('\n');
}
