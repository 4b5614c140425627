import { definePlugin } from '@fastkernels/core';

/**
 * MacroEval scoring and the leaderboard (issue 8): kernel-level aggregation of bench reports, end-to-end
 * MacroEval (calibrated correctness, coverage, speed, macro-averaged over families), and the leaderboard
 * (JSON, Markdown, a static HTML page). See README.md.
 */
export const macroevalPlugin = definePlugin({ name: 'macroeval', version: '0.2.0', register: () => {} });

export * from './config.js';
export * from './kernel-input.js';
export * from './kernel-aggregate.js';
export * from './e2e-record.js';
export * from './e2e-score.js';
export * from './macroeval.js';
export * from './leaderboard-schema.js';
export * from './board.js';
export * from './read-input.js';
export { renderMarkdown } from './render-markdown.js';
export { renderHtml } from './render-html.js';
export { scatterChart, familyBars } from './svg-charts.js';
export * from './score-command-core.js';
export * from './leaderboard-command-core.js';
