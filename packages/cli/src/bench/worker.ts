import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { closeSync, openSync, promises as fsp, readSync, readdirSync } from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { types } from 'node:util';
import {
  HarnessGuard,
  ParentMessageSchema,
  TensorParallelGroup,
  UserError,
  benchTask,
  errorMessage,
  measureProfile,
  parseSafetensorsHeader,
  protectHarness,
  setTensorParallelGroup,
  type Backend,
  type CaseResult,
  type GuardProbes,
  type MachineProfile,
  type ModuleClass,
  type ParentMessage,
  type PreflightFailure,
  type RunEnvironment,
  type TaskCase,
  type TaskDefinition,
  type TaskMessage,
  type Tensor,
  type WorkerBody,
} from '@fastkernels/core';
import { initDistributed } from '@fastkernels/backend-nccl';
import { EsbuildCandidateLoader, listCandidateFiles } from '../candidates/loader.js';
import { environment, selectBackend } from '../env.js';
import { agreeOnCase, agreeOnDirty, groupSeedOf, sharedVerifySeed } from './group.js';
import { sign } from './protocol.js';
import { candidatesUseTriton, prestartTriton } from './triton-prestart.js';
import { selfTimedCall } from '../candidates/torch/module.js';
import { TorchImportHackError } from '../candidates/torch/load.js';

/**
 * `fastkernels __worker`: the bench worker, forked by `fastkernels bench` (one per GPU). It installs
 * the integrity guard, then loads candidates (only here, never in the parent) and benches the tasks the
 * parent sends, one at a time, answering over the signed IPC channel.
 */

type Body = WorkerBody extends infer B ? (B extends { seq: number } ? Omit<B, 'seq'> : never) : never;

/** Resource kinds that are the harness's own plumbing (IPC and stdio pipes, their writes). */
const PLUMBING = new Set(['PipeWrap', 'WriteWrap', 'ShutdownWrap', 'TTYWrap', 'SignalWrap', 'PipeConnectWrap']);

function installWorkerTracking(): { live: () => number; wt: Record<string, unknown> } {
  const require = createRequire(import.meta.url);
  const wt = require('node:worker_threads') as Record<string, unknown> & { Worker: new (...a: unknown[]) => { once(e: string, f: () => void): void } };
  let live = 0;
  const Original = wt.Worker;
  class Worker extends Original {
    constructor(...args: unknown[]) {
      super(...args);
      live++;
      this.once('exit', () => live--);
    }
  }
  wt.Worker = Worker;
  syncBuiltinESMExports();
  return { live: () => live, wt };
}

function clocksOf(backend: Backend, device: number, physical: number): Record<string, string | number> | undefined {
  const info = backend.devices().find((d) => d.index === device);
  const out: Record<string, string | number> = {};
  for (const k of ['clockRateKHz', 'memoryClockRateKHz']) {
    const v = info?.extra?.[k];
    if (typeof v === 'number') out[k] = v;
  }
  if (backend.name === 'cuda') {
    try {
      const r = spawnSync('nvidia-smi', ['--query-gpu=clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,clocks_throttle_reasons.active', '--format=csv,noheader,nounits', '-i', String(physical)], { encoding: 'utf8', timeout: 5000 });
      if (r.status === 0) {
        const [sm, mem, maxSm, maxMem, throttle] = r.stdout.trim().split(/,\s*/);
        Object.assign(out, { smMHz: Number(sm), memMHz: Number(mem), maxSmMHz: Number(maxSm), maxMemMHz: Number(maxMem), throttleReasons: throttle ?? '' });
      }
    } catch {
      // no nvidia-smi: the rated clocks above are all we have
    }
  }
  return Object.keys(out).length ? out : undefined;
}

/** Overwrite generated inputs with captured values (safetensors), by input name. */
function captureFiller(task: TaskDefinition, values: Readonly<Record<string, { file: string; tensor: string }>>) {
  return (_c: TaskCase, inputs: (Tensor | null)[]) => {
    for (const [name, v] of Object.entries(values)) {
      const j = task.inputs.findIndex((s) => s.name === name);
      const t = j >= 0 ? inputs[j] : null;
      if (!t) throw new Error(`captured values for '${name}': the task has no such input in this case`);
      const fd = openSync(v.file, 'r');
      try {
        const head = Buffer.alloc(1 << 20);
        const n = readSync(fd, head, 0, head.byteLength, 0);
        const size = (fsStat(fd));
        const entries = parseSafetensorsHeader(head.subarray(0, n), size);
        const e = entries.get(v.tensor);
        if (!e) throw new Error(`${v.file}: no tensor '${v.tensor}'`);
        if (e.dtype !== t.dtype || e.end - e.start !== t.numel * t.itemsize) throw new Error(`${v.file}: tensor '${v.tensor}' is ${e.dtype}[${e.shape.join(', ')}], input '${name}' is ${t.dtype}[${t.shape.join(', ')}]`);
        const bytes = Buffer.alloc(e.end - e.start);
        readSync(fd, bytes, 0, bytes.byteLength, e.start);
        t.backend.write(t.storage, t.offset * t.itemsize, new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      } finally {
        closeSync(fd);
      }
    }
  };
}

function fsStat(fd: number): number {
  // fstat through the fs module (size of an open file)
  const require = createRequire(import.meta.url);
  return (require('node:fs') as typeof import('node:fs')).fstatSync(fd).size;
}

export async function runWorker(): Promise<number> {
  // Captured before anything else can run: the channel, the signature and the serialiser.
  const rawSend = process.send?.bind(process);
  if (!rawSend) {
    process.stderr.write('fastkernels: __worker is internal (started by `fastkernels bench`)\n');
    return 2;
  }
  const stringify = JSON.stringify;
  const inbox: unknown[] = [];
  let wake: (() => void) | undefined;
  process.on('message', (m) => {
    inbox.push(m);
    wake?.();
  });
  process.on('disconnect', () => process.exit(0));
  process.on('SIGINT', () => {}); // Ctrl-C is the parent's to handle
  const next = async (): Promise<ParentMessage> => {
    while (inbox.length === 0) await new Promise<void>((r) => (wake = r));
    const m = ParentMessageSchema.safeParse(inbox.shift());
    if (!m.success) throw new Error(`bad message from the parent: ${m.error.issues[0]?.message}`);
    return m.data;
  };

  const firstMessage = await next();
  if (firstMessage.type !== 'init') throw new Error('the first message must be init');
  const first: Extract<ParentMessage, { type: 'init' }> = firstMessage;
  const secret = first.secret;
  let seq = 0;
  const post = (body: Body) => {
    const text = stringify({ ...body, seq: ++seq });
    rawSend({ body: text, sig: sign(secret, text) });
  };

  let backend: Backend;
  const env = environment();
  try {
    backend = selectBackend(env, first.backend);
  } catch (e) {
    post({ type: 'fatal', message: e instanceof UserError ? e.describe() : errorMessage(e), usage: e instanceof UserError });
    return 1;
  }
  const device = first.device;
  // A group worker (bench --tp N, bench/group.ts) joins its peers' workers now, before the guard counts threads:
  // NCCL's proxy threads and connections are the harness's, not a candidate's.
  const groupSeed = groupSeedOf();
  let group: TensorParallelGroup | null = null;
  if (groupSeed !== undefined) {
    try {
      const d = await initDistributed();
      group = TensorParallelGroup.of(d);
      setTensorParallelGroup(group);
      group.agree([1], 'sum', { backend, device }); // the first collective sets up the connections
    } catch (e) {
      post({ type: 'fatal', message: `joining the bench workers' process group failed: ${errorMessage(e)}`, usage: false });
      return 1;
    }
  }
  await fsp.stat('.'); // start libuv's thread pool now, so it does not count as threads the candidate started
  const files = first.candidates ? listCandidateFiles(first.candidates) : [];
  if (backend.name === 'cuda' && candidatesUseTriton(files.map((f) => f.path))) prestartTriton();

  // ---- the guard, before any candidate code exists in this process --------------------------------
  const tracking = installWorkerTracking();
  const getResources = process.getActiveResourcesInfo.bind(process);
  const readdir = readdirSync;
  const probes: GuardProbes = {
    isProxy: types.isProxy,
    threads: () => {
      try {
        return readdir('/proc/self/task').length;
      } catch {
        return 0;
      }
    },
    handles: () => getResources().filter((h) => !PLUMBING.has(h)),
    workers: tracking.live,
  };
  if (backend.name === 'cuda') {
    const rt = (backend as unknown as { runtime: { stream: number; addon: object } }).runtime;
    probes.state = () => `stream ${rt.stream}`;
  }
  const guard = new HarnessGuard(backend, probes);
  protectHarness(guard, (g) => {
    g.protect('process', process, ['hrtime', 'send', 'getActiveResourcesInfo']);
    g.protect('process.hrtime', process.hrtime, ['bigint'], { freezeObject: true });
    g.protect('worker_threads', tracking.wt, ['Worker']);
    if (backend.name === 'cuda') {
      const rt = (backend as unknown as { runtime: { addon: object } }).runtime;
      g.protect('cuda.addon', rt.addon);
      g.protect('CudaRuntime.prototype', Object.getPrototypeOf(rt) as object);
    }
  });

  let profile: MachineProfile;
  try {
    profile = first.profile ?? measureProfile(backend, device);
  } catch (e) {
    post({ type: 'fatal', message: `measuring the copy and matmul rates failed: ${errorMessage(e)}`, usage: false });
    return 1;
  }
  const dev = backend.devices().find((d) => d.index === device);
  const runEnv: RunEnvironment = {
    device: dev?.name ?? backend.name,
    deviceIndex: first.physicalDevice,
    versions: { ...backend.versions() },
    clocks: clocksOf(backend, device, first.physicalDevice),
    profile,
  };

  // ---- candidates -----------------------------------------------------------------------------------
  const registry = env.registry.child(first.candidates ? `candidates:${first.candidates}` : 'self-test');
  const loaded = new Map<string, ModuleClass>();
  let dirty: string | undefined;
  const loadOne = async (taskId: string): Promise<PreflightFailure | undefined> => {
    const file = files.find((f) => f.taskId === taskId);
    if (!file || !first.candidates) return undefined;
    const before = guard.resources();
    const set = await new EsbuildCandidateLoader({ filter: (f) => f.taskId === taskId, backend: backend.name }).load(first.candidates, env.taskMap);
    const bad = guard.verify(`while ${file.relPath} was imported`);
    const grew = HarnessGuard.growth(before, guard.resources(), `while ${file.relPath} was imported`);
    const fail = set.failures[0];
    const tamper = fail ? guard.tamperAttempt(fail.error.message) ?? (fail.error instanceof TorchImportHackError ? fail.error.message : undefined) : undefined;
    if (bad.length || tamper || (grew && /worker/.test(grew))) {
      dirty = bad[0] ?? tamper ?? grew;
      return { taskId, file: file.relPath, message: `REWARD_HACK at import: ${dirty}`, hack: true };
    }
    if (fail) return { taskId, file: fail.file.relPath, message: fail.error.message, ...(fail.error.details.fix ? { fix: fail.error.details.fix } : {}), hack: false };
    const c = set.candidates[0];
    if (c) {
      loaded.set(taskId, c.cls);
      registry.override(taskId, c.cls);
    }
    return undefined;
  };
  const failures: PreflightFailure[] = [];
  for (const id of first.preflight) {
    const f = await loadOne(id);
    if (f) failures.push(f);
  }
  post({ type: 'ready', env: runEnv, profile, failures, dirty: dirty !== undefined });

  // ---- tasks ----------------------------------------------------------------------------------------
  for (;;) {
    const m = await next();
    if (m.type === 'shutdown') return 0;
    if (m.type !== 'task') continue;
    await runTask(m);
  }

  async function runTask(m: TaskMessage): Promise<void> {
    const task = env.taskMap.get(m.taskId);
    if (!task) throw new Error(`unknown task ${m.taskId}`);
    if (first.candidates && !loaded.has(m.taskId)) {
      const f = await loadOne(m.taskId);
      if (f) {
        for (const c of m.cases.length ? m.cases : [{ name: 'load', dtype: 'f32' as const }]) {
          post({ type: 'case', taskId: m.taskId, result: loadRow(task, c.name, c.dtype, f.hack ? 'REWARD_HACK' : 'RUNTIME_ERROR', f.message) });
        }
        post({ type: 'done', taskId: m.taskId, dirty: true, dirtyReason: f.message });
        return;
      }
    }
    let taskDirty: string | undefined = dirty;
    for (const [i, c] of m.cases.entries()) {
      const { values, ...plain } = c;
      const [r] = await benchTask({
        task, baseline: env.registry, candidate: registry, backend, device, cases: [plain as TaskCase],
        // in a group every rank must make the same calls: a warm-up counted in calls, shared seeds (bench/group.ts)
        rounds: first.options.rounds, iters: first.options.iters, warmup: first.options.warmup, warmupMs: group ? 0 : first.options.warmupMs,
        seed: first.options.seed, correctnessOnly: first.options.iters === 0,
        guard, profile, flushBytes: first.options.flushBytes ?? undefined, inputSets: first.options.inputSets, selfTimed: selfTimedCall,
        verifySeed: groupSeed !== undefined ? sharedVerifySeed(groupSeed, m.taskId, i) : randomInt(0, 2 ** 31 - 1), hiddenShape: first.options.hiddenShape,
        ...(values ? { prepareInputs: captureFiller(task, values) } : {}),
        onProgress: (p) => post({ type: 'progress', ...p, caseIndex: i, caseCount: m.cases.length }),
      });
      const result = group ? agreeOnCase(group, { backend, device }, r!) : r!;
      post({ type: 'case', taskId: m.taskId, result });
      if (result.status === 'REWARD_HACK') taskDirty ??= result.detail ?? 'reward hack';
      if (/CudaFatalError|sticky CUDA error/.test(result.detail ?? '')) taskDirty ??= 'a sticky CUDA error';
    }
    if (group && agreeOnDirty(group, { backend, device }, taskDirty !== undefined)) taskDirty ??= 'the worker of another rank of the process group must be replaced';
    post({ type: 'done', taskId: m.taskId, dirty: taskDirty !== undefined, ...(taskDirty ? { dirtyReason: taskDirty } : {}) });
  }
}

export function loadRow(task: Pick<TaskDefinition, 'id' | 'level'>, caseName: string, dtype: CaseResult['dtype'], status: CaseResult['status'], detail: string): CaseResult {
  return {
    task: task.id, level: task.level, case: caseName, dtype, status,
    maxAbsError: null, maxRelError: null, matchedRatio: null, baselineMs: null, candidateMs: null, speedup: null, ciLow: null, ciHigh: null,
    rounds: 0, iters: 0, detail,
  };
}
