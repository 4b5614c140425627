import { LAMBDA_KEYS, type LambdaKey } from './config.js';
import { asIsText, compositionKeys, entryName, fmt, fmtX, keptText, levelKeys, sensitivityText, validText } from './format.js';
import type { Leaderboard, LeaderboardRow } from './leaderboard-schema.js';
import { entryColors, escapeXml as esc, familyBars, key, scatterChart } from './svg-charts.js';

/**
 * The board as one static HTML page: inline CSS, inline script, inline SVG; no server, no network.
 * Everything λ-dependent is rendered for each λ and shown by `body[data-lambda]`, so the page reads
 * right even with scripts off; the script sorts, filters by mode, switches λ and keeps the ranks.
 * `#sort=c&lambda=thr&mode=ind` in the address opens the page in that state.
 */
const LAMBDA_LABEL: Record<LambdaKey, string> = { blend: 'blend', thr: 'throughput', lat: 'latency' };

const CSS = `
:root{--fg:#1f2328;--muted:#59636e;--line:#d0d7de;--bg:#fff;--hi:#ddf4ff}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--bg);margin:0;padding:24px 32px;max-width:1500px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
.meta{color:var(--muted);margin:0 0 12px}
.controls{display:flex;gap:20px;align-items:center;flex-wrap:wrap;margin:12px 0}
.controls .group{display:flex;gap:4px;align-items:center}
button{font:inherit;border:1px solid var(--line);background:#f6f8fa;border-radius:6px;padding:3px 10px;cursor:pointer}
button[aria-pressed=true]{background:#0969da;color:#fff;border-color:#0969da}
select{font:inherit;padding:2px 6px}
table{border-collapse:collapse;margin:6px 0;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #eaeef2;padding:5px 10px;text-align:right;white-space:nowrap}
th{background:#f6f8fa;font-weight:600;position:sticky;top:0}
th.l,td.l{text-align:left}
th[data-sort]{cursor:pointer;user-select:none}
th[data-sort]::after{content:" \\2195";color:#8c959f}
th.sorted::after{content:" \\2193";color:var(--fg)}
tbody tr:hover{background:var(--hi)}
td.rank{font-weight:700}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;vertical-align:baseline}
.charts{display:flex;gap:24px;flex-wrap:wrap;align-items:flex-start}
figure{margin:0}figcaption{color:var(--muted);font-size:12px;max-width:560px}
.chart text{font:11px system-ui,sans-serif;fill:#424a53}.chart .axis{font-size:12px;fill:var(--fg)}.chart .label{font-size:11px;fill:var(--fg)}
details{margin:4px 0}summary{cursor:pointer;font-weight:600}
.note{color:var(--muted);font-size:12px}
.bad{color:#cf222e}.ok{color:#1a7f37}
${LAMBDA_KEYS.map((k) => `body[data-lambda="${k}"] [data-l]:not([data-l="${k}"]){display:none}`).join('\n')}
`;

const SCRIPT = `
(function(){
  var body=document.body, table=document.getElementById('board'), tbody=table.tBodies[0];
  var state={sort:'score',lambda:body.dataset.lambda||'blend',mode:'all'};
  var LAMBDA_KEYS=['blend','thr','lat'];
  function val(tr,k){
    var d=tr.dataset, l=state.lambda;
    var v = k==='score'?d['score'+cap(l)] : k==='s'?d['s'+cap(l)] : k==='c'?d.c : k==='cov'?d.cov : k==='kernel'?d.kernel : k==='valid'?d.valid : d.name;
    if(k==='name') return v;
    var n=parseFloat(v); return isNaN(n)?-Infinity:n;
  }
  function cap(s){return s.charAt(0).toUpperCase()+s.slice(1)}
  function apply(){
    body.dataset.lambda=state.lambda;
    var rows=Array.prototype.slice.call(tbody.rows);
    rows.sort(function(a,b){
      if(state.sort==='name') return String(val(a,'name')).localeCompare(String(val(b,'name')));
      return val(b,state.sort)-val(a,state.sort) || val(b,'score')-val(a,'score');
    });
    rows.forEach(function(r){tbody.appendChild(r)});
    // Rank is always by Score at the current λ, among the rows shown.
    var shown=rows.filter(function(r){return state.mode==='all'||r.dataset.mode===state.mode});
    rows.forEach(function(r){r.hidden=shown.indexOf(r)<0});
    shown.forEach(function(r){var s=val(r,'score');r.cells[0].textContent=1+shown.filter(function(o){return val(o,'score')>s}).length});
    Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th){th.classList.toggle('sorted',th.dataset.sort===state.sort)});
    Array.prototype.forEach.call(document.querySelectorAll('[data-lambda-btn]'),function(b){b.setAttribute('aria-pressed',String(b.dataset.lambdaBtn===state.lambda))});
    Array.prototype.forEach.call(document.querySelectorAll('.point'),function(p){p.style.display=(state.mode==='all'||p.dataset.mode===state.mode)?'':'none'});
    document.getElementById('mode-filter').value=state.mode;
    document.getElementById('status').textContent='sorted by '+state.sort+', \\u03bb = '+state.lambda+(state.mode==='all'?'':', mode '+state.mode);
    var h='sort='+state.sort+'&lambda='+state.lambda+'&mode='+state.mode;
    if(location.hash.slice(1)!==h&&history.replaceState) history.replaceState(null,'','#'+h);
  }
  Array.prototype.forEach.call(table.tHead.rows[0].cells,function(th){
    if(th.dataset.sort) th.addEventListener('click',function(){state.sort=th.dataset.sort;apply()});
  });
  Array.prototype.forEach.call(document.querySelectorAll('[data-lambda-btn]'),function(b){
    b.addEventListener('click',function(){state.lambda=b.dataset.lambdaBtn;apply()});
  });
  document.getElementById('mode-filter').addEventListener('change',function(e){state.mode=e.target.value;apply()});
  location.hash.slice(1).split('&').forEach(function(kv){
    var p=kv.split('='); if(p.length!==2) return;
    if(p[0]==='sort'&&['score','s','c','cov','kernel','valid','name'].indexOf(p[1])>=0) state.sort=p[1];
    if(p[0]==='lambda'&&LAMBDA_KEYS.indexOf(p[1])>=0) state.lambda=p[1];
    if(p[0]==='mode') state.mode=decodeURIComponent(p[1]);
  });
  apply();
  document.documentElement.dataset.ready='true';
})();
`;

export function renderHtml(board: Leaderboard): string {
  const rows = board.boards.agents.rows;
  const e2eRows = rows.filter((r) => r.e2e);
  const colors = entryColors(rows);
  const modes = [...new Set(rows.map((r) => r.mode))];
  const env = board.environment;
  const h: string[] = [];
  h.push('<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">');
  h.push(`<title>FastKernels leaderboard</title><style>${CSS}</style></head><body data-lambda="blend">`);
  h.push('<header><h1>FastKernels leaderboard</h1>');
  h.push(
    `<p class="meta">Score = ${esc(board.metric.score)} · τ = ${board.metric.tau} · ${board.universe.n_models} models in ${board.universe.n_families} families · GPU ${esc(env.gpu ?? 'unknown')}${env.gpu_count ? ` ×${env.gpu_count}` : ''} · generated ${esc(board.generated_at)}${board.generated_by.commit ? ` at <code>${esc(board.generated_by.commit.slice(0, 12))}</code>` : ''}</p></header>`,
  );
  h.push('<section class="controls"><div class="group"><span>λ:</span>');
  for (const k of LAMBDA_KEYS) h.push(`<button type="button" data-lambda-btn="${k}" aria-pressed="${k === 'blend'}">${LAMBDA_LABEL[k]} (${board.environment.macroeval_config.lambdas[k]})</button>`);
  h.push('</div><div class="group"><label for="mode-filter">Mode:</label><select id="mode-filter"><option value="all">all</option>');
  for (const m of modes) h.push(`<option value="${esc(m)}">${esc(m)}</option>`);
  h.push('</select></div><span id="status" class="note"></span></section>');

  h.push('<h2>End-to-end MacroEval</h2>');
  h.push('<table id="board"><thead><tr>');
  const heads: Array<[string, string | null, string]> = [
    ['#', null, ''], ['Entry', 'name', 'l'], ['Mode', null, 'l'], ['Score', 'score', ''], ['Speedup S', 's', ''], ['Correctness C', 'c', ''], ['Coverage', 'cov', ''],
    ['Kernel geo', 'kernel', ''], ['Valid', 'valid', ''], ['As-is', null, ''], ['Kept', null, ''], ['Rank ½×/1×/2×', null, ''],
  ];
  for (const [label, sort, cls] of heads) h.push(`<th${cls ? ` class="${cls}"` : ''}${sort ? ` data-sort="${sort}"` : ''}>${esc(label)}</th>`);
  h.push('</tr></thead><tbody>');
  e2eRows.forEach((r, i) => {
    const d = r.e2e!.deployable;
    const data = [
      `data-entry="${esc(key(r))}"`, `data-mode="${esc(r.mode)}"`, `data-name="${esc(entryName(r))}"`,
      ...LAMBDA_KEYS.map((k) => `data-score-${k}="${d.score[k]}"`),
      ...LAMBDA_KEYS.map((k) => `data-s-${k}="${d.S_macro[k] ?? ''}"`),
      `data-c="${d.C_macro}"`, `data-cov="${d.coverage_macro}"`, `data-kernel="${r.kernel?.all?.geomean ?? ''}"`, `data-valid="${d.n_valid}"`,
    ].join(' ');
    h.push(`<tr ${data}><td class="rank">${i + 1}</td>`);
    h.push(`<td class="l"><span class="swatch" style="background:${colors.get(key(r))}"></span>${esc(r.agent)}</td><td class="l">${esc(r.mode_label)}</td>`);
    h.push(`<td class="score">${perLambda((k) => fmt(d.score[k]))}</td><td>${perLambda((k) => fmtX(d.S_macro[k], 3))}</td>`);
    h.push(`<td>${fmt(d.C_macro)}</td><td>${fmt(d.coverage_macro)}</td><td>${fmtX(r.kernel?.all?.geomean)}</td>`);
    h.push(`<td>${validText(r)}</td><td>${asIsText(r)}</td><td>${keptText(r)}</td><td>${sensitivityText(r)}</td></tr>`);
  });
  h.push('</tbody></table>');
  h.push('<p class="note">Click a column to sort. S is the geometric mean over families of the per-family geometric mean of s = thr<sup>λ</sup>·lat<sup>1−λ</sup> over valid models; C and coverage are family means; rank ½×/1×/2× is the rank with the discrepancy thresholds scaled.</p>');

  h.push('<h2>Kernel level against end to end</h2><div class="charts">');
  h.push(`<figure>${LAMBDA_KEYS.map((k) => `<div data-l="${k}">${scatterChart(rows, colors, k)}</div>`).join('')}<figcaption>One point per entry (● independent, ■ composed, ▲ sequential). Dashed: end to end equal to kernel level; most of the kernel-level gain does not survive deployment.</figcaption></figure>`);
  h.push(`<figure>${LAMBDA_KEYS.map((k) => `<div data-l="${k}">${familyBars(board, rows, colors, k)}</div>`).join('')}<figcaption>Per-family S_f over valid models; × = no valid model in the family (it adds nothing to S and zero to coverage).</figcaption></figure>`);
  h.push('</div>');

  h.push(kernelTable(rows, colors));
  h.push(compositionTable(rows));
  h.push(familyTable(board, e2eRows, colors));
  if (e2eRows.length) {
    h.push('<h2>Per model</h2>');
    for (const r of e2eRows) h.push(perModel(r));
  }
  h.push('<h2>Provenance</h2><ul class="note">');
  for (const r of rows) for (const f of [...r.provenance.kernel_files, ...r.provenance.e2e_files]) h.push(`<li>${esc(entryName(r))}: <code>${esc(f.path)}</code> sha256 <code>${f.sha256}</code></li>`);
  h.push('</ul>');
  if (board.known_gaps.length) h.push(`<h2>Known gaps</h2><ul class="note">${board.known_gaps.map((g) => `<li>${esc(g)}</li>`).join('')}</ul>`);
  h.push(`<script>${SCRIPT}</script></body></html>`);
  return h.join('\n');
}

function perLambda(f: (k: LambdaKey) => string): string {
  return LAMBDA_KEYS.map((k) => `<span data-l="${k}">${f(k)}</span>`).join('');
}

function kernelTable(rows: readonly LeaderboardRow[], colors: ReadonlyMap<string, string>): string {
  const kr = rows.filter((r) => r.kernel);
  if (!kr.length) return '';
  const levels = levelKeys(rows);
  const out = ['<h2>Kernel level</h2><table id="kernel-board"><thead><tr><th class="l">Entry</th><th class="l">Mode</th>'];
  for (const l of levels) out.push(`<th>${l} correct</th><th>${l} geo</th>`);
  out.push('<th>All geo</th><th>fast_1</th><th>fast_2</th><th>Winners</th></tr></thead><tbody>');
  for (const r of kr) {
    out.push(`<tr><td class="l"><span class="swatch" style="background:${colors.get(key(r))}"></span>${esc(r.agent)}</td><td class="l">${esc(r.mode_label)}</td>`);
    for (const l of levels) {
      const s = r.kernel![l];
      out.push(`<td>${s ? `${s.correct}/${s.benched}` : '—'}</td><td>${fmtX(s?.geomean)}</td>`);
    }
    const a = r.kernel!.all!;
    out.push(`<td>${fmtX(a.geomean)}</td><td>${a.fast_1}</td><td>${a.fast_2}</td><td>${a.winners}</td></tr>`);
  }
  out.push('</tbody></table><p class="note">Correct = every case correct; geo = geometric mean of per-op speedups over correct ops; winners = correct and ≥ 1.0x (deployed end to end).</p>');
  return out.join('');
}

function compositionTable(rows: readonly LeaderboardRow[]): string {
  const keys = compositionKeys(rows);
  if (!keys.length) return '';
  const seen = new Set<string>();
  const agents = rows.filter((r) => Object.keys(r.composition).length && !seen.has(r.agent_key) && seen.add(r.agent_key));
  const out = [`<h2>Composition</h2><table id="composition"><thead><tr><th class="l">Agent</th>${keys.map((k) => `<th>${esc(k.replace(/_/g, ' '))}</th>`).join('')}</tr></thead><tbody>`];
  for (const r of agents) {
    out.push(`<tr><td class="l">${esc(r.agent)}</td>`);
    for (const k of keys) {
      const c = r.composition[k];
      out.push(`<td>${c ? `${fmt(c.ratio, 2)} <span class="note">(n=${c.n}, broke ${c.broke})</span>` : '—'}</td>`);
    }
    out.push('</tr>');
  }
  out.push('</tbody></table><p class="note">Ratio of level geomeans paired over ops correct in both modes; broke = winners that fail once composed.</p>');
  return out.join('');
}

function familyTable(board: Leaderboard, rows: readonly LeaderboardRow[], colors: ReadonlyMap<string, string>): string {
  if (!rows.length) return '';
  const fams = board.universe.families;
  const out = [`<h2>Per family</h2><table id="families"><thead><tr><th class="l">Entry</th>${fams.map((f) => `<th>${esc(f)}</th>`).join('')}</tr></thead><tbody>`];
  for (const r of rows) {
    out.push(`<tr><td class="l"><span class="swatch" style="background:${colors.get(key(r))}"></span>${esc(entryName(r))}</td>`);
    for (const f of fams) {
      const s = r.e2e!.deployable.families[f];
      out.push(`<td>${s ? `${perLambda((k) => fmtX(s.S_f[k], 3))}<br><span class="note">C ${fmt(s.C_f, 2)} · ${s.n_valid}/${s.n} valid</span>` : '—'}</td>`);
    }
    out.push('</tr>');
  }
  out.push('</tbody></table>');
  return out.join('');
}

function perModel(r: LeaderboardRow): string {
  const out = [`<details><summary>${esc(entryName(r))}</summary><table class="per-model"><thead><tr><th class="l">Model</th><th class="l">Family</th><th class="l">Outcome</th><th>C</th><th>s</th><th>mean d</th><th>g</th><th>Dropped</th><th class="l">As-is</th></tr></thead><tbody>`];
  for (const m of r.e2e!.per_model) {
    const outcome = m.outcome === 'ok' ? (m.valid ? '<span class="ok">ok, valid</span>' : '<span class="bad">ok, below τ</span>') : `<span class="bad">${esc(m.outcome)}${m.detail ? ` (${esc(m.detail)})` : ''}</span>`;
    out.push(`<tr><td class="l">${esc(m.label)}</td><td class="l">${esc(m.family)}</td><td class="l">${outcome}</td><td>${fmt(m.C)}</td><td>${perLambda((k) => fmtX(m.s?.[k], 3))}</td><td>${fmt(m.mean_d, 4)}</td><td>${fmt(m.g, 4)}</td><td>${m.n_dropped}</td><td class="l">${m.as_is ? esc(m.as_is.outcome + (m.as_is.valid ? ', valid' : '')) : '—'}</td></tr>`);
  }
  out.push('</tbody></table></details>');
  return out.join('');
}
