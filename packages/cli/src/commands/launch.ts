/**
 * `fastkernels launch --nproc N [--devices all|split] -- <command> [args...]`: one process per GPU on this host
 * with a local rendezvous (see @fastkernels/backend-nccl's launcher). Exits with the failed rank's code, 128 + n
 * when interrupted, 0 when every rank succeeded.
 *
 * Wiring (app.ts): `.command(launchCommand(io))`, and in main(): `if (e instanceof LaunchExitError) { io.err(...);
 * return e.exitCode; }` so the failed rank's code becomes the CLI's (without it the error is reported as an
 * internal error with exit code 1).
 */
import { runLaunch, type DeviceMode } from '@fastkernels/backend-nccl';
import type { Argv } from 'yargs';
import type { Io } from '../io.js';

/** The ranks did not all succeed: `exitCode` is what the CLI should exit with. */
export class LaunchExitError extends Error {
  override readonly name = 'LaunchExitError';
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

interface LaunchArgs {
  nproc?: number;
  devices?: DeviceMode;
  'rendezvous-timeout'?: number;
  'kill-grace'?: number;
  'tag-output'?: boolean;
  cmd?: (string | number)[];
  '--'?: (string | number)[];
}

export function launchCommand(io: Io) {
  return {
    command: 'launch [cmd..]',
    describe: 'Run a command as N ranks, one process per GPU, with a local NCCL rendezvous (like torchrun --standalone)',
    builder: (y: Argv) =>
      y
        .parserConfiguration({ 'populate--': true })
        .positional('cmd', { type: 'string', array: true, describe: 'the command and its arguments (after --)' })
        .option('nproc', { type: 'number', demandOption: true, describe: 'number of ranks (one per GPU)' })
        .option('devices', {
          choices: ['all', 'split'] as const,
          default: 'all' as const,
          describe: "'all': every rank sees every GPU and uses device LOCAL_RANK (NVLink P2P works); 'split': one GPU per rank via CUDA_VISIBLE_DEVICES",
        })
        .option('rendezvous-timeout', { type: 'number', default: 300, describe: 'seconds for all ranks to reach the rendezvous once the first has' })
        .option('kill-grace', { type: 'number', default: 5, describe: 'seconds between SIGTERM and SIGKILL when stopping ranks' })
        .option('tag-output', { type: 'boolean', default: false, describe: 'prefix every output line with [rank N]' })
        .example('$0 launch --nproc 2 -- node bench-allreduce.mjs', 'two ranks on two GPUs')
        .epilog(
          'Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT, FASTKERNELS_LOCAL_RANK and\n' +
            'NCCL_NVLS_ENABLE=0 (unless set). When a rank fails the others are stopped; Ctrl-C is forwarded to every rank.',
        ),
    handler: async (argv: LaunchArgs) => {
      const words = [...(argv.cmd ?? []), ...(argv['--'] ?? [])].map(String);
      if (words.length === 0) throw new LaunchExitError('launch: no command given (usage: `fastkernels launch --nproc N -- <command> [args...]`)', 2);
      const nproc = Number(argv.nproc);
      if (!Number.isInteger(nproc) || nproc < 1) throw new LaunchExitError(`launch: --nproc must be a positive integer (got ${argv.nproc})`, 2);
      const r = await runLaunch({
        nproc,
        command: words[0]!,
        args: words.slice(1),
        devices: argv.devices ?? 'all',
        rendezvousTimeoutMs: (argv['rendezvous-timeout'] ?? 300) * 1000,
        killGraceMs: (argv['kill-grace'] ?? 5) * 1000,
        output: argv['tag-output'] ? 'prefix' : 'inherit',
        log: (l) => io.err(l + '\n'),
      });
      if (r.exitCode === 0) return;
      const why = r.failed ? r.failed.reason : r.interrupted ? `interrupted by ${r.interrupted}` : (r.error ?? `a rank exited with ${r.exitCode}`);
      throw new LaunchExitError(`launch: ${why}`, r.exitCode);
    },
  };
}
