/** A plain aligned text table: no colours, no box drawing, safe to paste and to grep. */
export interface Column {
  readonly header: string;
  readonly align?: 'left' | 'right';
}

export function renderTable(columns: readonly Column[], rows: readonly (readonly string[])[], indent = ''): string {
  const widths = columns.map((c, i) => Math.max(c.header.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    indent +
    cells
      .map((cell, i) => (columns[i]?.align === 'right' ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.header)), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n') + '\n';
}

/** Milliseconds with about 3 significant digits. */
export function formatMs(ms: number | null): string {
  if (ms === null) return '-';
  if (ms >= 100) return ms.toFixed(1);
  if (ms >= 1) return ms.toFixed(3);
  if (ms >= 0.001) return ms.toFixed(4);
  return ms.toExponential(2);
}

export function formatSpeedup(s: number | null, lo?: number | null, hi?: number | null): string {
  if (s === null) return '-';
  const ci = lo !== null && lo !== undefined && hi !== null && hi !== undefined ? ` [${lo.toFixed(2)}, ${hi.toFixed(2)}]` : '';
  return `${s.toFixed(2)}x${ci}`;
}

export function formatError(e: number | null): string {
  if (e === null) return '-';
  if (e === 0) return '0';
  return e.toExponential(2);
}

export function formatPercent(x: number): string {
  return `${(x * 100).toFixed(1)}%`;
}
