import { deviceTuningFileFor } from '@fastkernels/backend-cuda';
import { probeNccl } from '@fastkernels/backend-nccl';
import { tritonAvailability } from '@fastkernels/backend-triton';
import { settingsReport, unknownSettings, type SettingReport } from '@fastkernels/core';
import type { Argv } from 'yargs';
import { KNOWN_BACKENDS, environment, safeAvailability } from '../env.js';
import type { Io } from '../io.js';
import { renderTable } from '../output/table.js';
import { cliVersion } from '../version.js';

interface BackendReport {
  name: string;
  registered: boolean;
  available: boolean;
  reason?: string;
  devices: { index: number; name: string; totalMemory: number; multiprocessors: number; computeCapability?: string }[];
  versions: Record<string, string>;
}

const SHORT = 60;

interface ToolchainReport {
  name: string;
  available: boolean;
  detail: string;
}

/** Triton (through the host's Python) and NCCL: neither is a backend, both serve the CUDA backend. */
function probeToolchains(): ToolchainReport[] {
  const safe = (name: string, f: () => ToolchainReport): ToolchainReport => {
    try {
      return f();
    } catch (e) {
      return { name, available: false, detail: `probe failed: ${e instanceof Error ? e.message : String(e)}` };
    }
  };
  return [
    safe('triton', () => {
      const t = tritonAvailability();
      return { name: 'triton', available: t.available, detail: t.available ? `triton ${t.tritonVersion ?? '?'} in ${t.python ?? '?'}` : (t.reason ?? 'unknown reason') };
    }),
    safe('nccl', () => {
      const n = probeNccl();
      return { name: 'nccl', available: n.available, detail: n.available ? `${n.version ?? '?'} from ${n.library ?? '?'}` : (n.reason ?? 'unknown reason') };
    }),
  ];
}

/** The reason up to its first parenthesis, capped, for the table cell. */
function shortReason(reason: string): string {
  if (reason.length <= SHORT) return reason;
  const head = reason.split(' (')[0]!;
  return (head.length <= SHORT ? head : head.slice(0, SHORT - 1) + '…') + ' (details below)';
}

export function doctorCommand(io: Io) {
  return {
    command: 'doctor',
    describe: 'Which backends are available here, and why not',
    builder: (y: Argv) =>
      y
        .option('json', { type: 'boolean', describe: 'print the report as JSON' })
        .option('all', { type: 'boolean', describe: 'also list the internal settings (set by fastkernels for its own processes and tests)' })
        .example('$0 doctor', 'check this machine')
        .example('$0 doctor --json', 'the same, machine-readable'),
    handler: (argv: { json?: boolean; all?: boolean }) => {
      // first: a bad FASTKERNELS_* value is bad input (exit 2), whatever the backends say
      const settings = settingsReport();
      const unknown = unknownSettings();
      const env = environment();
      const reports: BackendReport[] = [];
      for (const b of env.backends) {
        const a = safeAvailability(b);
        let devices: BackendReport['devices'] = [];
        let versions: Record<string, string> = {};
        if (a.available) {
          try {
            devices = b.devices().map((d) => ({ index: d.index, name: d.name, totalMemory: d.totalMemory, multiprocessors: d.multiprocessors, ...(d.computeCapability ? { computeCapability: d.computeCapability } : {}) }));
            versions = { ...b.versions() };
          } catch (e) {
            reports.push({ name: b.name, registered: true, available: false, reason: `devices() failed: ${e instanceof Error ? e.message : String(e)}`, devices: [], versions: {} });
            continue;
          }
        }
        reports.push({ name: b.name, registered: true, available: a.available, ...(a.reason ? { reason: a.reason } : {}), devices, versions });
      }
      for (const [name, what] of Object.entries(KNOWN_BACKENDS)) {
        if (!reports.some((r) => r.name === name)) {
          reports.push({ name, registered: false, available: false, reason: `not part of this build: its plugin (${what}) is not loaded yet`, devices: [], versions: {} });
        }
      }
      const auto = reports.find((r) => r.name === 'cuda' && r.available) ?? reports.find((r) => r.available);
      const toolchains = probeToolchains();
      const cudaDevice = reports.find((r) => r.name === 'cuda' && r.available)?.devices[0]?.name;
      const tuning = { device: cudaDevice ?? null, file: `tuning/${deviceTuningFileFor(cudaDevice)}`, override: settings.find((x) => x.name === 'FASTKERNELS_TUNING' && x.source === 'environment')?.value ?? null };
      if (argv.json) {
        io.out(JSON.stringify({ cli: cliVersion(), node: process.version, platform: `${process.platform}-${process.arch}`, auto: auto?.name ?? null, backends: reports, toolchains, tuning, settings, unknownVariables: unknown }, null, 2) + '\n');
        return;
      }
      io.out(`fastkernels ${cliVersion()} on node ${process.version} (${process.platform}-${process.arch})\n\n`);
      io.out(renderTable(
        [{ header: 'backend' }, { header: 'status' }, { header: 'devices / reason' }],
        reports.map((r) => [
          r.name,
          r.available ? 'available' : 'unavailable',
          r.available ? r.devices.map((d) => `${d.index}: ${d.name}${d.computeCapability ? ` (sm ${d.computeCapability})` : ''}`).join('; ') : shortReason(r.reason ?? ''),
        ]),
      ));
      // Long reasons (every library location tried) read better as paragraphs under the table.
      for (const r of reports.filter((x) => !x.available && (x.reason ?? '').length > SHORT)) io.out(`\n${r.name}: ${r.reason}\n`);
      io.out('\n');
      for (const r of reports.filter((x) => Object.keys(x.versions).length)) io.out(`${r.name} versions: ${Object.entries(r.versions).map(([k, v]) => `${k} ${v}`).join(', ')}\n`);
      io.out('\nkernel toolchains and collectives (used on the CUDA backend):\n');
      for (const t of toolchains) io.out(`  ${t.name.padEnd(7)} ${t.available ? `available (${t.detail})` : `unavailable: ${t.detail}`}\n`);
      io.out(`\n--backend auto picks: ${auto?.name ?? 'nothing (no backend available)'}\n`);
      io.out(`CUDA kernel tuning: ${tuning.file}${tuning.override ? ` with FASTKERNELS_TUNING=${tuning.override} over it` : ''} (\`fastkernels tuning show\` lists it)\n`);
      printSettings(io, settings, unknown, argv.all === true);
    },
  };
}

/** The settings table (value and where it came from); internal ones only with --all. */
function printSettings(io: Io, settings: readonly SettingReport[], unknown: readonly string[], all: boolean): void {
  const shown = settings.filter((x) => all || !x.internal);
  io.out(`\nsettings (environment variables${all ? '' : '; --all adds the internal ones'}):\n`);
  io.out(renderTable(
    [{ header: 'variable' }, { header: 'value' }, { header: 'source' }, { header: 'what it does' }],
    shown.map((x) => [x.name, x.value || '-', x.source, `${x.internal ? '(internal) ' : ''}${x.doc}`]),
  ));
  for (const name of unknown) io.out(`warning: ${name} is set but no setting reads it (a typo, or a variable this version dropped: docs/tuning.md)\n`);
}
