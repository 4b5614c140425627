import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { runLeaderboard } from './leaderboard-command-core.js';
import { runScore } from './score-command-core.js';
import { DEMO_E2E_FILES, DEMO_KERNEL_FILES } from './demo.js';

/**
 * The HTML board in headless Chromium: the DOM after the page's script ran (--dump-dom) and a screenshot.
 * Install: `apt-get install -y chromium` (Debian). FASTKERNELS_CHROMIUM=/path picks a binary;
 * FASTKERNELS_WRITE_DOCS_PNG=1 also refreshes docs/leaderboard.png.
 */
function findChromium(): string | undefined {
  const env = process.env.FASTKERNELS_CHROMIUM;
  if (env) return existsSync(env) ? env : undefined;
  const names = ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable', 'chrome'];
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    for (const n of names) if (dir && existsSync(join(dir, n))) return join(dir, n);
  }
  return undefined;
}

const chromium = findChromium();
const REASON = 'SKIPPED: chromium not found on PATH (install it with `apt-get install -y chromium`, or set FASTKERNELS_CHROMIUM)';
if (!chromium) console.warn(`[macroeval] ${REASON}`);

const FIXTURES = join(import.meta.dirname, '..', 'fixtures');
// Relative to the working folder, so the page (and docs/leaderboard.png) shows no machine-specific paths.
const DEMO_KERNEL = DEMO_KERNEL_FILES.map((f) => relative(process.cwd(), join(FIXTURES, f)));
const DEMO_E2E = DEMO_E2E_FILES.map((f) => relative(process.cwd(), join(FIXTURES, f)));
const DOCS_PNG = join(import.meta.dirname, '..', '..', '..', 'docs', 'leaderboard.png');

describe.skipIf(!chromium)(chromium ? 'the HTML board in headless Chromium' : `the HTML board in headless Chromium — ${REASON}`, () => {
  let dir: string;
  let page: string;
  const run = (args: string[]) =>
    execFileSync(chromium!, ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--hide-scrollbars', `--user-data-dir=${join(dir, 'profile')}`, ...args], {
      encoding: 'utf8',
      timeout: 30_000,
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 64 * 1024 * 1024,
    });
  const dump = (hash = '') => run(['--virtual-time-budget=3000', '--dump-dom', pathToFileURL(page).href + hash]);
  const bodyRows = (dom: string) => {
    const tbody = /<table id="board">[\s\S]*?<tbody>([\s\S]*?)<\/tbody>/.exec(dom)![1]!;
    return [...tbody.matchAll(/<tr ([^>]*)>([\s\S]*?)<\/tr>/g)].map((m) => ({
      entry: /data-entry="([^"]+)"/.exec(m[1]!)![1]!,
      c: Number(/data-c="([^"]+)"/.exec(m[1]!)![1]),
      scoreThr: Number(/data-score-thr="([^"]+)"/.exec(m[1]!)![1]),
      scoreBlend: Number(/data-score-blend="([^"]+)"/.exec(m[1]!)![1]),
      rank: /<td class="rank">(\d+)<\/td>/.exec(m[2]!)![1],
      hidden: /\bhidden(="")?/.test(m[1]!),
    }));
  };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'fk-html-'));
    runScore({ kernel: DEMO_KERNEL, e2e: DEMO_E2E, out: join(dir, 'leaderboard.json'), generatedAt: '2026-11-30T12:00:00.000Z' });
    page = runLeaderboard({ in: join(dir, 'leaderboard.json'), out: join(dir, 'site') }).html;
  });

  it('runs the script: table sorted by Score, ranks, λ = blend, charts present', () => {
    const dom = dump();
    expect(dom).toMatch(/<html[^>]*data-ready="true"/);
    expect(dom).toMatch(/<body data-lambda="blend"/);
    const rows = bodyRows(dom);
    expect(rows).toHaveLength(3);
    expect(rows.map((r) => r.rank)).toEqual(['1', '2', '3']);
    expect(rows.map((r) => r.scoreBlend)).toEqual([...rows.map((r) => r.scoreBlend)].sort((a, b) => b - a));
    expect(dom).toMatch(/<span id="status"[^>]*>sorted by score, λ = blend<\/span>/);
    // Scatter: one marker per entry with kernel and e2e results, for each λ.
    for (const l of ['blend', 'thr', 'lat']) {
      const svg = new RegExp(`<svg[^>]*id="scatter-${l}"[\\s\\S]*?</svg>`).exec(dom)![0];
      expect(svg.match(/class="point"/g)).toHaveLength(3);
      const bars = new RegExp(`<svg[^>]*id="families-${l}"[\\s\\S]*?</svg>`).exec(dom)![0];
      expect((bars.match(/class="bar"/g) ?? []).length + (bars.match(/class="bar-missing"/g) ?? []).length).toBe(3 * 8);
    }
    expect(dom).toContain('<table id="kernel-board">');
    expect(dom).toContain('<table id="composition">');
    expect(dom).toContain('<table id="families">');
  });

  it('sorts by correctness at λ = thr from the address, and ranks stay by Score at that λ', () => {
    const dom = dump('#sort=c&lambda=thr');
    expect(dom).toMatch(/<body data-lambda="thr"/);
    const rows = bodyRows(dom);
    expect(rows.map((r) => r.c)).toEqual([...rows.map((r) => r.c)].sort((a, b) => b - a));
    for (const r of rows) expect(Number(r.rank)).toBe(1 + rows.filter((o) => o.scoreThr > r.scoreThr).length);
    expect(dom).toMatch(/data-lambda-btn="thr" aria-pressed="true"/);
    expect(dom).toMatch(/<th data-sort="c" class="sorted">|<th class="sorted" data-sort="c">/);
  });

  it('filters by mode', () => {
    const rows = bodyRows(dump('#sort=score&lambda=blend&mode=seq'));
    expect(rows.filter((r) => !r.hidden).map((r) => r.entry)).toEqual(['atlas/seq']);
  });

  it('renders a screenshot', () => {
    const png = join(dir, 'leaderboard.png');
    run(['--window-size=1400,1800', `--screenshot=${png}`, pathToFileURL(page).href]);
    const bytes = readFileSync(png);
    expect(bytes.subarray(1, 4).toString('latin1')).toBe('PNG');
    expect(statSync(png).size).toBeGreaterThan(50_000);
    if (process.env.FASTKERNELS_WRITE_DOCS_PNG === '1') {
      mkdirSync(join(DOCS_PNG, '..'), { recursive: true });
      copyFileSync(png, DOCS_PNG);
    }
  });
});
