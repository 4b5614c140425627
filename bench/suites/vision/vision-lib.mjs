// The vision speed suite's parts that need no GPU (plain ESM, no package imports: run.sh's node runs merge.mjs with it,
// the driver vision.mjs bundles it, test/bench-vision.test.ts tests it): how many timed calls a measurement gets, the
// targets of issues 33 and 34, and the merge of both sides' per-model files into vision.json with the table.

/** Timed calls of a measurement: the plan's time budget over one call's time, clamped (both sides use this rule). */
export function itersFor(plan, oneMs, budgetS = plan.timeBudgetS) {
  return Math.trunc(Math.min(plan.maxIters, Math.max(plan.minIters, (budgetS * 1e3) / Math.max(oneMs, 1e-3))));
}

/**
 * The targets (H200; binding there, informative on any other card, the CPU, the tiny configs, or FLUX cut to fewer
 * blocks). `role` picks the model's row: 'small' is batch 1, 'big' batch 32 (2 in the tiny smoke). `metric`:
 *   latency   our ms / torch's ms (<= bound)        speedup  torch's ms / our ms, i.e. images/s over torch's (>= bound)
 *   floor     our ms / the GEMM + attention times of one step measured alone (<= bound)
 * `torch`: the torch time held to: eagerMs, compileCudagraphsMs (mode="reduce-overhead") or bestCompileMs (the faster
 * of the compile modes timed).
 */
export const TARGETS = [
  { id: 'yolov10n-bs1-vs-compile-cudagraphs', model: 'yolov10n', role: 'small', metric: 'latency', torch: 'compileCudagraphsMs', bound: 1.0, label: 'YOLOv10n 640 bs 1 latency vs torch.compile + CUDA graphs' },
  { id: 'yolov10n-bs1-vs-eager', model: 'yolov10n', role: 'small', metric: 'latency', torch: 'eagerMs', bound: 0.3, label: 'YOLOv10n 640 bs 1 latency vs torch eager' },
  { id: 'yolov10n-bs32-vs-compile', model: 'yolov10n', role: 'big', metric: 'speedup', torch: 'bestCompileMs', bound: 1.0, label: 'YOLOv10n 640 bs 32 images/s vs torch.compile' },
  { id: 'convnextv2-base-bs32-vs-compile', model: 'convnextv2_base', role: 'big', metric: 'speedup', torch: 'bestCompileMs', bound: 1.0, label: 'ConvNeXt-V2-base 384 bs 32 images/s vs torch.compile' },
  { id: 'flux-step-vs-compile', model: 'flux_transformer', role: 'small', metric: 'speedup', torch: 'bestCompileMs', bound: 1.0, label: 'FLUX.1-dev transformer step (1024^2) vs compiled PyTorch' },
  { id: 'flux-step-vs-gemm-attention', model: 'flux_transformer', role: 'small', metric: 'floor', bound: 1.15, label: 'FLUX.1-dev step vs its GEMMs + attention alone' },
  { id: 'vae-decode-vs-eager', model: 'flux_vae', role: 'small', metric: 'speedup', torch: 'eagerMs', bound: 1.0, label: 'FLUX.1 VAE decode (1024^2) vs reference eager' },
];

/** The headline keys bench/run records per target (history.jsonl). */
export const HEADLINE_KEYS = {
  'yolov10n-bs1-vs-compile-cudagraphs': 'yolov10nBs1LatencyVsCompileCg',
  'yolov10n-bs1-vs-eager': 'yolov10nBs1LatencyVsEager',
  'yolov10n-bs32-vs-compile': 'yolov10nBs32VsCompile',
  'convnextv2-base-bs32-vs-compile': 'convnextBs32VsCompile',
  'flux-step-vs-compile': 'fluxStepVsCompile',
  'flux-step-vs-gemm-attention': 'fluxStepOverGemmAttention',
  'vae-decode-vs-eager': 'vaeDecodeVsEager',
};

const num = (x) => (typeof x === 'number' && Number.isFinite(x) ? x : null);
const div = (a, b) => (num(a) !== null && num(b) !== null && b > 0 ? a / b : null);

/** The row's torch times with bestCompileMs (the faster compile mode timed), or {} when torch did not run. */
function torchTimes(t) {
  if (!t) return {};
  const compiled = [t.compileMs, t.compileCudagraphsMs].filter((x) => num(x) !== null);
  return { ...t, bestCompileMs: compiled.length ? Math.min(...compiled) : null };
}

/**
 * plan (vision_bench.py configs' plan.json), per model the two sides' files (or null), the two matrix-rate files ->
 * vision.json's object: a row per plan row (FLOPs, both sides' times, TFLOP/s and fraction of the matrix rate,
 * ratios), the targets with verdicts, the errors, and a summary of the target values.
 */
export function mergeVision({ plan, ours = {}, torch = {}, torchSkipped = null, rateOurs = null, rateTorch = null, logs = {}, commit = '' }) {
  const firstTorch = Object.values(torch).find((t) => t?.versions);
  const firstOurs = Object.values(ours).find((o) => o?.device);
  const gpu = firstTorch?.versions?.gpu ?? firstOurs?.device ?? null;
  const backend = firstOurs?.backend ?? rateOurs?.backend ?? null;
  const matrixTflops = num(rateOurs?.tflops) ?? num(rateTorch?.tflops);
  // the PyTorch side not run at all (no torch, --no-torch) is one error, not one a model
  const errors = torchSkipped ? [{ model: '*', side: 'torch', error: `not run: ${torchSkipped}` }] : [];
  for (const m of plan.models) {
    for (const [side, f] of torchSkipped ? [['ours', ours[m]]] : [['ours', ours[m]], ['torch', torch[m]]]) {
      if (!f) errors.push({ model: m, side, error: `wrote nothing${logs[`${m}/${side}`] ? `: ${logs[`${m}/${side}`]}` : ''}` });
      for (const e of f?.errors ?? []) errors.push({ model: m, side, ...(e.row ? { row: e.row } : {}), error: `${e.run ? `${e.run}: ` : ''}${e.error}` });
    }
  }
  const rows = plan.rows.map((r) => {
    const o = ours[r.model]?.rows?.[r.id] ?? null;
    const t = torchTimes(torch[r.model]?.rows?.[r.id]);
    const flops = num(t.flops?.total);
    const tflops = (ms) => (flops !== null && num(ms) !== null ? flops / (ms / 1e3) / 1e12 : null);
    const oursMs = num(o?.ms);
    const row = {
      id: r.id, model: r.model, role: r.batch === 1 ? 'small' : 'big', batch: r.batch, dtype: r.dtype, inputs: plan.inputs[r.model] ?? null,
      flops: t.flops ?? null,
      ours: o,
      torch: Object.keys(t).length ? t : null,
      imagesPerS: { ours: div(r.batch * 1e3, oursMs), eager: div(r.batch * 1e3, t.eagerMs), compile: div(r.batch * 1e3, t.compileMs), compileCudagraphs: div(r.batch * 1e3, t.compileCudagraphsMs) },
      tflops: { ours: tflops(oursMs), eager: tflops(t.eagerMs), compile: tflops(t.bestCompileMs) },
      fracMatrix: { ours: div(tflops(oursMs), matrixTflops), compile: div(tflops(t.bestCompileMs), matrixTflops) },
      // torch's ms over ours: > 1 is ours faster
      speedup: { eager: div(t.eagerMs, oursMs), compile: div(t.compileMs, oursMs), compileCudagraphs: div(t.compileCudagraphsMs, oursMs), bestCompile: div(t.bestCompileMs, oursMs) },
    };
    if (t.floor) row.floor = { gemmMs: t.floor.gemmMs, attentionMs: t.floor.attentionMs, sumMs: t.floor.sumMs, oursOverSum: div(oursMs, t.floor.sumMs) };
    return row;
  });
  const h200 = /H200/i.test(gpu ?? '') && backend === 'cuda';
  const targets = TARGETS.filter((g) => plan.models.includes(g.model)).map((g) => {
    const row = rows.find((x) => x.model === g.model && x.role === g.role) ?? null;
    let value = null;
    if (row && g.metric === 'floor') value = row.floor?.oursOverSum ?? null;
    else if (row && g.metric === 'latency') value = div(row.ours?.ms, row.torch?.[g.torch]);
    else if (row) value = div(row.torch?.[g.torch], row.ours?.ms);
    const met = value === null ? null : g.metric === 'speedup' ? value >= g.bound : value <= g.bound;
    const why = [];
    if (!h200) why.push(`measured on ${backend === 'cpu' ? 'the CPU backend' : (gpu ?? 'an unknown device')}, the targets are for an H200`);
    if (plan.tiny) why.push('tiny configs');
    if (g.model === 'flux_transformer' && !plan.fluxFullDepth && !plan.tiny) why.push(`FLUX cut to ${plan.fluxLayers.join(' + ')} blocks (--flux-layers)`);
    if (g.role === 'big' && row && row.batch !== 32) why.push(`batch ${row.batch}`);
    return {
      ...g, row: row?.id ?? null, value, met,
      verdict: met === null ? 'NOT MEASURED' : met ? 'PASS' : 'MISS',
      informative: why.length > 0, ...(why.length ? { why: why.join('; ') } : {}),
    };
  });
  const summary = Object.fromEntries(targets.map((g) => [HEADLINE_KEYS[g.id], g.value]));
  summary.targetsPassed = `${targets.filter((g) => g.met).length}/${targets.length}`;
  summary.oursMs = Object.fromEntries(rows.map((r) => [r.id, num(r.ours?.ms)])); // recorded even where torch did not run
  return {
    commit: commit || null,
    gpu, backend,
    versions: { torch: firstTorch?.versions ?? null, ours: firstOurs?.versions ?? null },
    torchSkipped,
    settings: {
      tiny: plan.tiny, quick: plan.quick, models: plan.models, fluxLayers: plan.fluxLayers, fluxFullDepth: plan.fluxFullDepth,
      timeBudgetS: plan.timeBudgetS, iters: [plan.minIters, plan.maxIters],
      convAlgoSearch: convAlgoSearchOf(plan),
      timing: 'device events around one call after an L2 flush, median (ours: bench/lib/timing.mjs; torch: bench/lib/torch_timing.py); the host clock on the CPU backend',
      ours: 'YOLOv10 / ConvNeXt-V2: the vision runner (fused at load, static buffers, channels-last, one CUDA graph per batch size), its device forward (forwardInPlace: no upload or read-back; endToEndMs is run() with both); FLUX transformer / VAE decoder: eager module calls, weights filled on the device',
      torch: firstTorch?.settings ?? null,
      flops: 'counted in torch\'s eager pass: convolutions and Linears (forward hooks) and attention (QK^T + PV), 2 per multiply-add',
      launch: firstOurs?.launch ?? null,
    },
    matrix: { tflops: matrixTflops, ours: rateOurs, torch: rateTorch },
    rows, targets, summary, errors,
  };
}

const f = (x, digits = 2, width = 8) => (num(x) === null ? '-' : x.toFixed(digits)).padStart(width);

/** The report's lines: the rows, FLUX's floor, the errors, the targets last. */
/** The conv algorithm policy both sides ran (plan.json's convAlgoSearch; plans from before it was recorded: torch benchmark, ours heuristic, named so). */
export function convAlgoSearchOf(plan) {
  return plan.convAlgoSearch ?? 'mixed (torch benchmark, ours heuristic: a plan from before convAlgoSearch)';
}

export function formatVision(m) {
  const lines = [];
  lines.push(`vision.json (commit ${m.commit ?? '?'}; ${m.gpu ?? '?'}, ours on ${m.backend ?? '?'}; torch ${m.versions.torch?.torch ?? '-'})${m.settings.tiny ? ' TINY CONFIGS: timings test the plumbing only' : ''}`);
  const search = m.settings.convAlgoSearch;
  lines.push(`conv algorithms: ${search === 'benchmark' ? "cuDNN's benchmark search on both sides (torch.backends.cudnn.benchmark = True, our conv.algoSearch 'benchmark')" : search === 'heuristic' ? "cuDNN's heuristics on both sides (torch.backends.cudnn.benchmark = False, our conv.algoSearch 'heuristic')" : search}`);
  lines.push(`matrix rate ${f(m.matrix.tflops, 0, 0)} TFLOP/s (dense bf16 ${m.matrix.ours?.n ?? m.matrix.torch?.n ?? '?'}^3 through ${m.matrix.ours ? 'our matmul' : 'torch.matmul'}, this run); ms: one forward of the batch; x: torch's time over ours (> 1: ours faster)`);
  lines.push(`${'row'.padEnd(22)} ${'dtype'.padEnd(5)} ${'GFLOP'.padStart(8)} ${'ours ms'.padStart(9)} ${'img/s'.padStart(8)} ${'TFLOP/s'.padStart(8)} ${'%matrix'.padStart(7)} ${'eager ms'.padStart(9)} ${'comp ms'.padStart(9)} ${'comp+cg'.padStart(9)} ${'x eager'.padStart(7)} ${'x comp'.padStart(7)} ${'x cg'.padStart(7)}`);
  for (const r of m.rows) {
    const t = r.torch ?? {};
    lines.push(`${r.id.padEnd(22)} ${r.dtype.padEnd(5)} ${f(r.flops?.total / 1e9, 1)} ${f(r.ours?.ms, 3, 9)} ${f(r.imagesPerS.ours, 1)} ${f(r.tflops.ours, 1)} ${f(r.fracMatrix.ours && r.fracMatrix.ours * 100, 1, 7)} `
      + `${f(t.eagerMs, 3, 9)} ${f(t.compileMs, 3, 9)} ${f(t.compileCudagraphsMs, 3, 9)} ${f(r.speedup.eager, 2, 7)} ${f(r.speedup.compile, 2, 7)} ${f(r.speedup.compileCudagraphs, 2, 7)}`);
  }
  for (const r of m.rows.filter((x) => x.floor)) {
    lines.push(`${r.id}: GEMMs ${f(r.floor.gemmMs, 2, 0)} ms + attention ${f(r.floor.attentionMs, 2, 0)} ms = ${f(r.floor.sumMs, 2, 0)} ms measured alone (torch, each shape x its count); ours ${f(r.ours?.ms, 2, 0)} ms = ${f(r.floor.oursOverSum, 3, 0)}x of it`);
  }
  if (m.settings.tiny === false && m.settings.fluxFullDepth === false) lines.push(`NOTE: FLUX transformer cut to ${m.settings.fluxLayers.join(' double + ')} single blocks (--flux-layers), not FLUX.1-dev's 19 + 38`);
  for (const e of m.errors) lines.push(`ERROR ${e.model} ${e.side}${e.row ? ` ${e.row}` : ''}: ${String(e.error).replace(/\s+/g, ' ').slice(0, 300)}`);
  for (const g of m.targets) {
    const op = g.metric === 'speedup' ? '>=' : '<=';
    const what = g.metric === 'speedup' ? 'x torch' : g.metric === 'latency' ? 'x torch time' : 'x GEMM+attn';
    lines.push(`target: ${g.label} ${op} ${g.bound}: ${g.value === null ? '-' : g.value.toFixed(3)} ${what}  ${g.verdict}${g.informative ? ` (informative: ${g.why})` : ''}`);
  }
  return lines;
}
