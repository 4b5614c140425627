import { runLeaderboard } from '@fastkernels/macroeval';
import type { Argv } from 'yargs';
import type { Io } from '../io.js';

/** `fastkernels leaderboard`: leaderboard.json → Markdown and a static HTML page (no server, no network). */
export interface LeaderboardArgs {
  in: string;
  out: string;
}

export function leaderboardCommand(io: Io) {
  return {
    command: 'leaderboard',
    describe: 'Render a leaderboard.json as Markdown and a static HTML page with charts',
    builder: (y: Argv) =>
      y
        .option('in', { type: 'string', default: 'leaderboard.json', describe: 'the board written by `fastkernels score`' })
        .option('out', { type: 'string', default: 'leaderboard', describe: 'folder for leaderboard.md and index.html' })
        .example('$0 leaderboard --in leaderboard.json --out site', 'then open site/index.html in a browser (it works from file://)')
        .epilog('The page has everything inline (CSS, script, SVG charts): sort by Score, speedup, correctness or coverage; switch λ (blend, throughput, latency); filter by mode.'),
    handler: (argv: LeaderboardArgs) => {
      const res = runLeaderboard({ in: argv.in, out: argv.out });
      io.out(`fastkernels leaderboard: ${res.board.boards.agents.rows.length} entries\n  ${res.markdown}\n  ${res.html}\n`);
    },
  };
}
