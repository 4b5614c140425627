import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { UserError } from '@fastkernels/core';
import { LeaderboardSchema, type Leaderboard } from './leaderboard-schema.js';
import { loadJson } from './read-input.js';
import { renderHtml } from './render-html.js';
import { renderMarkdown } from './render-markdown.js';

/** `fastkernels leaderboard --in leaderboard.json --out DIR`: write DIR/leaderboard.md and DIR/index.html. */
export interface LeaderboardOptions {
  readonly in: string;
  readonly out: string;
}

export interface LeaderboardResult {
  readonly board: Leaderboard;
  readonly markdown: string;
  readonly html: string;
}

export function loadLeaderboard(path: string): Leaderboard {
  return loadJson(path, LeaderboardSchema, 'leaderboard', 'pass a leaderboard.json written by `fastkernels score` (schema_version 1)').data;
}

export function runLeaderboard(opts: LeaderboardOptions): LeaderboardResult {
  const board = loadLeaderboard(opts.in);
  try {
    mkdirSync(opts.out, { recursive: true });
  } catch (e) {
    throw new UserError(`cannot create the output folder (${(e as NodeJS.ErrnoException).code ?? String(e)})`, { file: opts.out, field: '--out', fix: 'give a folder path that can be created and written' });
  }
  const markdown = join(opts.out, 'leaderboard.md');
  const html = join(opts.out, 'index.html');
  writeFileSync(markdown, renderMarkdown(board));
  writeFileSync(html, renderHtml(board));
  return { board, markdown, html };
}
