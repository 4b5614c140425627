import { UserError } from '@fastkernels/core';
import yargs from 'yargs';
import { InterruptedError, benchCommand } from './commands/bench.js';
import { captureCommand } from './commands/capture.js';
import { classifyCommand } from './commands/classify.js';
import { detectCommand } from './commands/detect.js';
import { doctorCommand } from './commands/doctor.js';
import { e2eCommand } from './commands/e2e.js';
import { embedCommand } from './commands/embed.js';
import { generateCommand } from './commands/generate.js';
import { generateImageCommand } from './commands/generate-image.js';
import { infoCommand } from './commands/info.js';
import { initWeightsCommand } from './commands/init-weights.js';
import { LaunchExitError, launchCommand } from './commands/launch.js';
import { leaderboardCommand } from './commands/leaderboard.js';
import { listCommand } from './commands/list.js';
import { mergeCommand } from './commands/merge.js';
import { profileCommand } from './commands/profile.js';
import { scoreCommand } from './commands/score.js';
import { serveCommand } from './commands/serve.js';
import { benchServeCommand } from './commands/bench-serve.js';
import { stubsCommand } from './commands/stubs.js';
import { tuningCommand } from './commands/tuning.js';
import { processIo, type Io } from './io.js';
import { runWorker } from './bench/worker.js';
import { cliVersion } from './version.js';
import { invocationName, withInvocation } from './invocation.js';

import { EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, reportUserError } from './exit-codes.js';


/** A parse or validation error from yargs (unknown flag, missing option, bad choice). */
class UsageError extends Error {}

export function buildApp(argv: readonly string[], io: Io = processIo, name = 'fastkernels') {
  return yargs([...argv])
    .scriptName(name)
    .usage('$0 <command> [options]\n\nEvaluate GPU-kernel candidates against production-module baselines: list the tasks, write candidate\nskeletons, then check and time a candidate set.')
    .command(listCommand(io))
    .command(infoCommand(io))
    .command(stubsCommand(io, name))
    .command(benchCommand(io, argv))
    .command(mergeCommand(io))
    .command(doctorCommand(io))
    .command(generateCommand(io, argv))
    .command(embedCommand(io))
    .command(generateImageCommand(io))
    .command(detectCommand(io))
    .command(classifyCommand(io))
    .command(initWeightsCommand(io))
    .command(e2eCommand(io, argv))
    .command(captureCommand(io))
    .command(profileCommand(io))
    .command(serveCommand(io, argv))
    .command(benchServeCommand(io))
    .command(launchCommand(io))
    .command(scoreCommand(io))
    .command(leaderboardCommand(io))
    .command(tuningCommand(io))
    .option('verbose', { type: 'boolean', default: false, global: true, describe: 'print stack traces with errors' })
    .demandCommand(1, 'pick a command: list, info, stubs, bench, merge, doctor, ...')
    .strict()
    .recommendCommands()
    .example('$0 list', 'the tasks and the modules they mirror')
    .example('$0 info L1/rms_norm', "one task's interface, shapes and tolerance")
    .example('$0 stubs --out my-kernels --level 1', 'candidate skeletons to fill in')
    .example('$0 bench --candidates examples/candidates/cpu-demo', 'check and time a candidate set')
    .example('$0 doctor', 'which backends work here')
    .epilog('Exit codes: 0 done (candidate failures are results, not errors), 1 internal error, 2 bad input (a flag, a file, a candidate),\n130 interrupted (Ctrl-C; a bench --json report keeps the results so far).\nTabular commands take --json. Run `$0 <command> --help` for its options and examples.')
    .version(cliVersion())
    .alias('h', 'help')
    .help()
    .wrap(Math.min(110, process.stdout.columns || 100))
    .exitProcess(false)
    .fail((msg, err) => {
      if (err) throw err;
      throw new UsageError(msg);
    });
}

/** Run the CLI; returns the exit code (never calls process.exit, so buffered output is flushed). */
export async function main(argv: readonly string[], io: Io = processIo): Promise<number> {
  const verbose = argv.includes('--verbose');
  // The hidden bench worker (forked by `bench` from this very entry point); not a yargs command.
  if (argv[0] === '__worker') return runWorker();
  // Hints name the CLI as the user started it (`npx fastkernels …` in a checkout), so they run as written. JSON on
  // stdout (one write, starting with { or [) is left alone: results must not depend on how the CLI was started.
  const name = invocationName();
  if (io === processIo) quietOnClosedPipe();
  const raw = io;
  io = { out: (t) => raw.out(/^\s*[[{]/.test(t) ? t : withInvocation(t, name)), err: (t) => raw.err(withInvocation(t, name)) };
  let app: ReturnType<typeof buildApp> | undefined;
  try {
    app = buildApp(argv, io, name);
    const unknown = unknownCommand(argv, commandNames(app));
    if (unknown) throw new UsageError(unknown);
    await app.parseAsync();
    return EXIT_OK;
  } catch (e) {
    if (e instanceof UserError) return reportUserError(e, (t) => io.err(t), verbose);
    if (e instanceof LaunchExitError) {
      // A rank failed: the launcher already named it; exit with the code it chose.
      io.err(`fastkernels: ${e.message}\n`);
      return e.exitCode;
    }
    if (e instanceof InterruptedError) {
      io.err(`fastkernels: ${e.message}\n`);
      return EXIT_INTERRUPTED;
    }
    if (e instanceof UsageError || (e instanceof Error && e.name === 'YError')) {
      // yargs' own suggestion ("Did you mean bench?") drops what was wrong; unknownCommand() above says both.
      io.err(`fastkernels: error: ${e.message}${unknownFlagHint(e.message, app)}\nfix: run \`fastkernels --help\` (or \`fastkernels <command> --help\`) for the options\n`);
      return EXIT_USAGE;
    }
    const message = e instanceof Error ? e.message : String(e);
    io.err(`fastkernels: internal error: ${message}\n`);
    io.err(verbose && e instanceof Error && e.stack ? `${e.stack}\n` : 'run again with --verbose for the stack trace, and report it\n');
    return EXIT_INTERNAL;
  }
}

let pipeHandled = false;
/** `fastkernels list | head`: the reader closed stdout early. Stop quietly, as Unix tools do, not with an EPIPE trace. */
function quietOnClosedPipe(): void {
  if (pipeHandled) return;
  pipeHandled = true;
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(0);
    throw e;
  });
}

/** Levenshtein distance (small strings: command names). */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/** The registered command names (yargs keeps them; its typings do not show the accessor). */
function commandNames(app: unknown): string[] {
  return (app as { getInternalMethods(): { getCommandInstance(): { getCommands(): string[] } } }).getInternalMethods().getCommandInstance().getCommands();
}

/** For yargs' "Unknown argument: candidatse": the closest flag of the command that was parsed (its options are known then). */
function unknownFlagHint(message: string, app: unknown): string {
  const m = /^Unknown arguments?: (.+)$/.exec(message);
  if (!m || !app) return '';
  let keys: string[];
  try {
    keys = Object.keys((app as { getOptions(): { key: Record<string, unknown> } }).getOptions().key);
  } catch {
    return '';
  }
  const words = m[1]!.split(', ');
  const hints = words.flatMap((word) => {
    const best = keys.map((k) => ({ k, d: distance(word, k) })).sort((a, b) => a.d - b.d)[0];
    if (!best || best.d > (best.k.length <= 4 ? 1 : 2)) return [];
    return [words.length === 1 ? `--${best.k}` : `--${best.k} (for ${word})`];
  });
  return hints.length ? `. Did you mean ${hints.join(', ')}?` : '';
}

/** Words a newcomer tries for a command of another name. */
const SYNONYMS: Readonly<Record<string, string>> = { tasks: 'list', run: 'bench', benchmark: 'bench', test: 'bench', eval: 'bench', show: 'info', check: 'doctor' };

/**
 * The message when the first word is no command (undefined when it is one): the closest command when one is close
 * (a typo, or a word such as `benchmark` or `tasks`), and the list of commands. No word at all (only flags, and not
 * --help or --version) asks for a command the same way.
 */
export function unknownCommand(argv: readonly string[], commands: readonly string[]): string | undefined {
  // The only global flags (--verbose, --help, --version) take no value, so the first other word is the command.
  const word = argv.find((a) => !a.startsWith('-'));
  if (word === undefined) {
    if (argv.some((a) => a === '--help' || a === '-h' || a === '--version')) return undefined;
    return `no command given. The commands: ${commands.join(', ')}`;
  }
  if (commands.includes(word)) return undefined;
  const w = word.toLowerCase();
  let best = SYNONYMS[w] && commands.includes(SYNONYMS[w]) ? SYNONYMS[w] : undefined;
  if (!best) {
    const scored = commands.map((c) => ({ c, d: distance(w, c) })).sort((a, b) => a.d - b.d)[0];
    if (scored && scored.d <= (scored.c.length <= 4 ? 1 : 2)) best = scored.c;
  }
  return `unknown command '${word}'.${best ? ` Did you mean \`fastkernels ${best}\`?` : ''} The commands: ${commands.join(', ')}`;
}
