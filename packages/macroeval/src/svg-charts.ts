import type { LambdaKey } from './config.js';
import { entryName, fmt } from './format.js';
import type { Leaderboard, LeaderboardRow } from './leaderboard-schema.js';

/** Inline SVG charts for the HTML board (no library, no network): drawn once per λ. */
export const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22'];

export function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

const NICE = [0.1, 0.2, 0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1, 1.05, 1.1, 1.15, 1.2, 1.3, 1.4, 1.5, 1.75, 2, 2.5, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100];

/** Nice ticks inside [lo, hi], at least `gap` pixels apart on the axis `at` draws (1 always kept). */
function logTicks(lo: number, hi: number, at: (v: number) => number, gap = 34): number[] {
  const inside = NICE.filter((t) => t >= lo && t <= hi);
  const kept = inside.includes(1) ? [1] : [];
  for (const t of [...inside].sort((a, b) => Math.abs(Math.log(a)) - Math.abs(Math.log(b)))) {
    if (kept.every((k) => Math.abs(at(k) - at(t)) >= gap)) kept.push(t);
  }
  return kept.sort((a, b) => a - b);
}

function logDomain(values: readonly number[]): [number, number] {
  const lo = Math.min(1, ...values);
  const hi = Math.max(1, ...values);
  const pad = Math.max(0.05, (Math.log(hi) - Math.log(lo)) * 0.12);
  return [Math.exp(Math.log(lo) - pad), Math.exp(Math.log(hi) + pad)];
}

function marker(mode: string, x: number, y: number, color: string, title: string): string {
  const t = `<title>${escapeXml(title)}</title>`;
  const common = `class="point" data-mode="${escapeXml(mode)}" fill="${color}" stroke="#fff" stroke-width="1.5"`;
  if (mode === 'seq') return `<path ${common} d="M${x} ${y - 8}L${x + 7.5} ${y + 5.5}L${x - 7.5} ${y + 5.5}Z">${t}</path>`;
  if (mode === 'comp') return `<rect ${common} x="${x - 6.5}" y="${y - 6.5}" width="13" height="13">${t}</rect>`;
  return `<circle ${common} cx="${x}" cy="${y}" r="7">${t}</circle>`;
}

/** Kernel-level geomean (all levels pooled) against end-to-end S_macro, one point per entry, log-log. */
export function scatterChart(rows: readonly LeaderboardRow[], colors: ReadonlyMap<string, string>, lambda: LambdaKey): string {
  const W = 560;
  const H = 400;
  const m = { l: 62, r: 24, t: 28, b: 52 };
  const pts = rows
    .filter((r) => r.e2e && r.kernel?.all?.geomean && r.e2e.deployable.S_macro[lambda] !== null)
    .map((r) => ({ row: r, x: r.kernel!.all!.geomean!, y: r.e2e!.deployable.S_macro[lambda]! }));
  const [x0, x1] = logDomain(pts.map((p) => p.x));
  const [y0, y1] = logDomain(pts.map((p) => p.y));
  const sx = (v: number) => m.l + ((Math.log(v) - Math.log(x0)) / (Math.log(x1) - Math.log(x0))) * (W - m.l - m.r);
  const sy = (v: number) => H - m.b - ((Math.log(v) - Math.log(y0)) / (Math.log(y1) - Math.log(y0))) * (H - m.t - m.b);
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" class="chart scatter" id="scatter-${lambda}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="Kernel-level against end-to-end speedup">`);
  parts.push(`<rect x="${m.l}" y="${m.t}" width="${W - m.l - m.r}" height="${H - m.t - m.b}" fill="#fafbfc" stroke="#d0d7de"/>`);
  for (const t of logTicks(x0, x1, sx)) {
    const x = sx(t).toFixed(1);
    parts.push(`<line x1="${x}" x2="${x}" y1="${m.t}" y2="${H - m.b}" stroke="${t === 1 ? '#8c959f' : '#eaeef2'}"/>`);
    parts.push(`<text x="${x}" y="${H - m.b + 16}" text-anchor="middle" class="tick">${t}x</text>`);
  }
  for (const t of logTicks(y0, y1, sy)) {
    const y = sy(t).toFixed(1);
    parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${y}" y2="${y}" stroke="${t === 1 ? '#8c959f' : '#eaeef2'}"/>`);
    parts.push(`<text x="${m.l - 6}" y="${y}" dy="4" text-anchor="end" class="tick">${t}x</text>`);
  }
  // y = x: where end-to-end would match the kernel level.
  const lo = Math.max(x0, y0);
  const hi = Math.min(x1, y1);
  if (lo < hi) parts.push(`<line x1="${sx(lo).toFixed(1)}" y1="${sy(lo).toFixed(1)}" x2="${sx(hi).toFixed(1)}" y2="${sy(hi).toFixed(1)}" stroke="#8c959f" stroke-dasharray="5 4"><title>end to end = kernel level</title></line>`);
  parts.push(`<text x="${(m.l + W - m.r) / 2}" y="${H - 12}" text-anchor="middle" class="axis">kernel-level speedup (geomean over correct ops, all levels)</text>`);
  parts.push(`<text transform="translate(16 ${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle" class="axis">end-to-end S_macro (λ = ${lambda})</text>`);
  for (const p of pts) {
    const x = sx(p.x);
    const y = sy(p.y);
    const color = colors.get(key(p.row)) ?? '#333';
    parts.push(marker(p.row.mode, +x.toFixed(1), +y.toFixed(1), color, `${entryName(p.row)}: kernel ${fmt(p.x, 2)}x, end to end ${fmt(p.y)}x`));
    const anchor = x > W - 170 ? 'end' : 'start';
    parts.push(`<text x="${(x + (anchor === 'end' ? -11 : 11)).toFixed(1)}" y="${(y + 4).toFixed(1)}" text-anchor="${anchor}" class="label">${escapeXml(entryName(p.row))}</text>`);
  }
  if (pts.length === 0) parts.push(`<text x="${W / 2}" y="${H / 2}" text-anchor="middle" class="axis">no entry has both kernel-level and end-to-end results</text>`);
  parts.push('</svg>');
  return parts.join('');
}

/** Per-family S_f, one bar per entry and family; a cross on the axis where the family has no valid model. */
export function familyBars(board: Leaderboard, rows: readonly LeaderboardRow[], colors: ReadonlyMap<string, string>, lambda: LambdaKey): string {
  const fams = board.universe.families;
  const entries = rows.filter((r) => r.e2e);
  const W = Math.max(560, 90 + fams.length * Math.max(70, entries.length * 16 + 20));
  const H = 400;
  const m = { l: 56, r: 16, t: 28, b: 70 };
  const values = entries.flatMap((r) => fams.map((f) => r.e2e!.deployable.families[f]?.S_f[lambda] ?? null)).filter((v): v is number => v !== null);
  const top = Math.max(1.25, ...values) * 1.08;
  const sy = (v: number) => H - m.b - (v / top) * (H - m.t - m.b);
  const groupW = (W - m.l - m.r) / Math.max(1, fams.length);
  const barW = Math.min(26, (groupW - 14) / Math.max(1, entries.length));
  const parts: string[] = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" class="chart bars" id="families-${lambda}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="Per-family end-to-end speedup">`);
  const step = top > 4 ? 1 : top > 2 ? 0.5 : 0.25;
  for (let t = 0; t <= top + 1e-9; t += step) {
    const y = sy(t).toFixed(1);
    parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${y}" y2="${y}" stroke="${Math.abs(t - 1) < 1e-9 ? '#57606a' : '#eaeef2'}"${Math.abs(t - 1) < 1e-9 ? ' stroke-dasharray="5 4"' : ''}/>`);
    parts.push(`<text x="${m.l - 6}" y="${y}" dy="4" text-anchor="end" class="tick">${t.toFixed(2)}x</text>`);
  }
  fams.forEach((f, fi) => {
    const gx = m.l + fi * groupW + (groupW - barW * entries.length) / 2;
    entries.forEach((r, ei) => {
      const fs = r.e2e!.deployable.families[f];
      const v = fs?.S_f[lambda] ?? null;
      const x = gx + ei * barW;
      const color = colors.get(key(r)) ?? '#333';
      const title = `${entryName(r)} — ${f}: ${v === null ? 'no valid model' : `S_f ${fmt(v)}x`}, C_f ${fmt(fs?.C_f)}, coverage ${fmt(fs?.coverage_f, 2)}`;
      if (v === null) {
        const cx = x + barW / 2;
        const cy = H - m.b - 6;
        parts.push(`<path class="bar-missing" d="M${(cx - 4).toFixed(1)} ${cy - 4}L${(cx + 4).toFixed(1)} ${cy + 4}M${(cx + 4).toFixed(1)} ${cy - 4}L${(cx - 4).toFixed(1)} ${cy + 4}" stroke="${color}" stroke-width="2"><title>${escapeXml(title)}</title></path>`);
      } else {
        const y = sy(v);
        parts.push(`<rect class="bar" data-family="${escapeXml(f)}" x="${(x + 1).toFixed(1)}" y="${y.toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(H - m.b - y).toFixed(1)}" fill="${color}"${r.mode === 'seq' ? ' fill-opacity="0.65"' : ''}><title>${escapeXml(title)}</title></rect>`);
      }
    });
    const lx = m.l + fi * groupW + groupW / 2;
    parts.push(`<text x="${lx.toFixed(1)}" y="${H - m.b + 16}" text-anchor="middle" class="tick">${escapeXml(f)}</text>`);
  });
  parts.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${H - m.b}" y2="${H - m.b}" stroke="#57606a"/>`);
  parts.push(`<text transform="translate(14 ${(m.t + H - m.b) / 2}) rotate(-90)" text-anchor="middle" class="axis">S_f (λ = ${lambda})</text>`);
  // Legend.
  let lx = m.l;
  const ly = H - 22;
  for (const r of entries) {
    const name = entryName(r);
    parts.push(`<rect x="${lx}" y="${ly - 9}" width="11" height="11" fill="${colors.get(key(r)) ?? '#333'}"/><text x="${lx + 15}" y="${ly}" class="label">${escapeXml(name)}</text>`);
    lx += 28 + name.length * 6.5;
  }
  parts.push('</svg>');
  return parts.join('');
}

export function key(r: Pick<LeaderboardRow, 'agent_key' | 'mode'>): string {
  return `${r.agent_key}/${r.mode}`;
}

/** One colour per entry, in board order. */
export function entryColors(rows: readonly LeaderboardRow[]): Map<string, string> {
  return new Map(rows.map((r, i) => [key(r), PALETTE[i % PALETTE.length]!]));
}
