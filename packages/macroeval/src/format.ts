import type { LeaderboardRow } from './leaderboard-schema.js';

/** Number formatting shared by the Markdown and HTML renderers. */
export function fmt(x: number | null | undefined, digits = 3): string {
  return x === null || x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(digits);
}

export function fmtX(x: number | null | undefined, digits = 2): string {
  return x === null || x === undefined || !Number.isFinite(x) ? '—' : `${x.toFixed(digits)}x`;
}

export function fmtPct(x: number | null | undefined): string {
  return x === null || x === undefined || !Number.isFinite(x) ? '—' : `${Math.round(x * 100)}%`;
}

export function keptText(row: LeaderboardRow): string {
  const d = row.e2e?.drops;
  if (!d || d.requested === null) return '—';
  return `${fmtPct(d.kept_fraction)} (${d.kept}/${d.requested})`;
}

export function validText(row: LeaderboardRow): string {
  const e = row.e2e;
  if (!e) return '—';
  return `${e.deployable.n_valid}/${e.deployable.n_items}`;
}

export function asIsText(row: LeaderboardRow): string {
  const e = row.e2e;
  if (!e?.all_winners) return '—';
  return `${e.all_winners.n_valid}/${e.all_winners.n_items}`;
}

export function sensitivityText(row: LeaderboardRow): string {
  const s = row.e2e?.sensitivity;
  if (!s) return '—';
  return Object.values(s).map((v) => v.rank).join('/');
}

export function levelKeys(rows: readonly LeaderboardRow[]): string[] {
  const keys = new Set<string>();
  for (const r of rows) for (const k of Object.keys(r.kernel ?? {})) if (k !== 'all') keys.add(k);
  return [...keys].sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)));
}

export function compositionKeys(rows: readonly LeaderboardRow[]): string[] {
  const keys = new Set<string>();
  for (const r of rows) for (const k of Object.keys(r.composition)) keys.add(k);
  const order = (k: string) => (k.startsWith('ind_to_comp') ? 0 : k.startsWith('comp_to_seq') ? 1 : 2);
  return [...keys].sort((a, b) => order(a) - order(b) || a.localeCompare(b, 'en', { numeric: true }));
}

export function entryName(row: LeaderboardRow): string {
  return `${row.agent} (${row.mode_label})`;
}
