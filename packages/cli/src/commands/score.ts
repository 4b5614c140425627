import { runScore } from '@fastkernels/macroeval';
import type { Argv } from 'yargs';
import { listFlag } from '../flags.js';
import type { Io } from '../io.js';

/** `fastkernels score`: kernel bench reports + e2e reports → leaderboard.json (MacroEval, schema_version 1). */
export interface ScoreArgs {
  kernel?: string[];
  e2e?: string[];
  out: string;
  config?: string;
  gpu?: string;
}

/** The repository's sample score inputs (two synthetic agents), named by the examples. */
export const FIXTURES = 'packages/macroeval/fixtures';

export function scoreCommand(io: Io) {
  return {
    command: 'score',
    describe: 'Score kernel-level and end-to-end results into a leaderboard.json (MacroEval)',
    builder: (y: Argv) =>
      y
        .option('kernel', { type: 'string', array: true, describe: 'kernel bench reports (`bench --json FILE`), as [AGENT:MODE=]FILE; repeat for several entries' })
        .option('e2e', { type: 'string', array: true, describe: 'end-to-end reports (per-model records), as [AGENT:MODE=]FILE' })
        .option('out', { type: 'string', default: 'leaderboard.json', describe: 'the board to write' })
        .option('config', { type: 'string', describe: 'MacroEval config JSON (tau, g_quantile, g_floor, g_cap, g_fallback, f, lambdas, sensitivity_scales); defaults as published' })
        .option('gpu', { type: 'string', describe: 'GPU name for the board when the inputs record none' })
        // Real files (the repository's sample inputs, run from its root), so the examples run as written; the one
        // with AGENT:MODE= names is in the epilog, whose lines yargs does not cut inside a path as it does the examples'.
        .example(`$0 score --kernel ${FIXTURES}/kernel-*.json --e2e ${FIXTURES}/e2e-*.json`, 'entries named inside the files (agent, mode) or by candidate folder <agent>-<mode>')
        .epilog(
          'Entries named on the command line instead (AGENT:MODE=FILE):\n' +
            '  $0 score \\\n' +
            `    --kernel Atlas:ind=${FIXTURES}/kernel-atlas-ind.json \\\n` +
            `             Atlas:comp=${FIXTURES}/kernel-atlas-comp.json \\\n` +
            `    --e2e Atlas:ind=${FIXTURES}/e2e-atlas-ind.json \\\n` +
            '    --out leaderboard.json\n' +
            `The examples' files are sample inputs in the repository (${FIXTURES}/, two synthetic agents); run them from its root.\n` +
            'MODE is ind (independent), comp (composed) or seq (sequential). Several agents and modes merge into one board.\n' +
            'Score = S_macro × C_macro × Coverage_macro at λ = 0.5 (also λ = 1 throughput and λ = 0 latency).',
        ),
    handler: (argv: ScoreArgs) => {
      const kernel = listFlag(argv.kernel);
      const e2e = listFlag(argv.e2e);
      const { board, out } = runScore({ kernel, e2e, out: argv.out, ...(argv.config ? { config: argv.config } : {}), ...(argv.gpu ? { gpu: argv.gpu } : {}) });
      const rows = board.boards.agents.rows;
      io.out(`fastkernels score: ${rows.length} entr${rows.length === 1 ? 'y' : 'ies'}, ${board.universe.n_models} models in ${board.universe.n_families} families\n`);
      for (const [i, r] of rows.entries()) {
        const d = r.e2e?.deployable;
        const e2eText = d ? `Score ${d.score.blend.toFixed(3)}  S ${d.S_macro.blend?.toFixed(3) ?? '—'}  C ${d.C_macro.toFixed(3)}  Cov ${d.coverage_macro.toFixed(3)}` : 'no e2e results';
        const k = r.kernel?.all;
        const kernelText = k ? `kernel ${k.correct}/${k.benched} correct, geo ${k.geomean?.toFixed(2) ?? '—'}x` : 'no kernel results';
        io.out(`  ${String(i + 1).padStart(2)}. ${`${r.agent} (${r.mode_label})`.padEnd(28)} ${e2eText}; ${kernelText}\n`);
      }
      io.out(`board: ${out}\n`);
    },
  };
}
