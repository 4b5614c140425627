import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pythonCandidates } from '@fastkernels/backend-triton';
import { BenchReportSchema, type BenchReport } from '@fastkernels/core';
import { describe, expect, it } from 'vitest';
import { ROOT, gpuHostBundle, startCli } from './helpers.js';

/**
 * PyTorch candidates on the GPU (tag `gpu`): examples/candidates/torch-demo, the torch stubs and the Python side-stream
 * exploit through the CLI with --backend cuda: the worker maps the harness's device buffers through CUDA IPC and times
 * with CUDA events. The GPU host's Python with torch is found as on any machine (FASTKERNELS_PYTHON, python3, the
 * torch venv). Sets come from the GPU-host bundle (tools/gpu-host-bundle.mjs) when there is one, else the repo.
 */
const G = { tags: ['gpu'], timeout: 900_000 };
const bundle = gpuHostBundle();
const from = (bundled: string, repo: string) => (bundle && existsSync(join(bundle, bundled)) ? join(bundle, bundled) : join(ROOT, repo));
const DEMO = from('examples/torch-demo', 'examples/candidates/torch-demo');
const SIDE_STREAM = from('exploits/py-side-stream', 'test/exploits/py-side-stream');

/**
 * PyTorch timing one module's forward by itself, as the harness's protocol does: 4 rotating bf16 input sets, the L2
 * flushed (2x its size written) before each call, CUDA events around the call, 10 warm-ups, the median of 200 calls.
 * Between calls this process never sleeps (synchronize spins); the worker polls its request channel while the harness
 * times, for the same reason: a launch-bound case's event time is the launching CPU's pace. argv: the .py, T, H,
 * residual (0/1). Prints the median in ms.
 */
const TIMING = `
import importlib.util, statistics, sys, torch
path, T, H, res = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
spec = importlib.util.spec_from_file_location("cand", path); mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
m = mod.RMSNorm(H, 1e-5).cuda().to(torch.bfloat16)
with torch.no_grad():
    m.weight.normal_()
sets = [(torch.randn(T, H, device="cuda", dtype=torch.bfloat16), torch.randn(T, H, device="cuda", dtype=torch.bfloat16) if res else None) for _ in range(4)]
l2 = torch.cuda.get_device_properties(0).L2_cache_size
flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
times = []
with torch.no_grad():
    for i in range(210):
        x, r = sets[i % 4]
        flush.zero_()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); m(x, r); b.record()
        torch.cuda.synchronize()
        if i >= 10:
            times.append(a.elapsed_time(b))
print(statistics.median(times))
`;

/**
 * Where a launch-bound call's extra time in the worker comes from (issue 30; printed, no asserts): the TIMING loop
 * above under each of the worker's two differences from it, one at a time — inputs that another process allocated and
 * shares through CUDA IPC, and the L2 flush done by that other process (its own CUDA context, as the harness's) with a
 * pipe round trip before each call (polled, as the worker polls). argv: the .py, T, H. Prints one `name ms` line each.
 */
const GAP_SPLIT = `
import importlib.util, statistics, sys, torch, torch.multiprocessing as mp

def peer(conn, T, H):
    xs = [(torch.randn(T, H, device="cuda", dtype=torch.bfloat16), torch.randn(T, H, device="cuda", dtype=torch.bfloat16)) for _ in range(4)]
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    conn.send(xs)
    while conn.recv() is not None:
        flush.zero_()
        torch.cuda.synchronize()
        conn.send(1)

def main():
    path, T, H = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    spec = importlib.util.spec_from_file_location("cand", path); mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    m = mod.RMSNorm(H, 1e-5).cuda().to(torch.bfloat16)
    own = [(torch.randn(T, H, device="cuda", dtype=torch.bfloat16), torch.randn(T, H, device="cuda", dtype=torch.bfloat16)) for _ in range(4)]
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    here, there = mp.get_context("spawn").Pipe()
    p = mp.get_context("spawn").Process(target=peer, args=(there, T, H), daemon=True)
    p.start()
    ipc = here.recv()

    def own_flush():
        flush.zero_()

    def peer_flush():
        here.send(1)
        while not here.poll(0):
            pass
        here.recv()

    def median_ms(inputs, flush_fn):
        times = []
        with torch.no_grad():
            for i in range(210):
                x, r = inputs[i % 4]
                flush_fn()
                torch.cuda.synchronize()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(); m(x, r); b.record()
                torch.cuda.synchronize()
                if i >= 10:
                    times.append(a.elapsed_time(b))
        return statistics.median(times)

    for name, inputs, fn in [("own-inputs-own-flush", own, own_flush), ("ipc-inputs-own-flush", ipc, own_flush),
                             ("own-inputs-peer-flush", own, peer_flush), ("ipc-inputs-peer-flush", ipc, peer_flush)]:
        print(name, median_ms(inputs, fn), flush=True)
    here.send(None)
    p.join(30)

if __name__ == "__main__":
    main()
`;

async function bench(args: string[]): Promise<BenchReport> {
  const r = await startCli(['bench', '--backend', 'cuda', '--json', ...args], { timeoutMs: 900_000 }).result;
  if (r.code !== 0) throw new Error(`bench: exit ${r.code}\n${r.stderr.slice(-3000)}`);
  return BenchReportSchema.parse(JSON.parse(r.stdout));
}

describe('PyTorch candidates (GPU)', () => {
  it('torch-demo: every candidate gets its declared status, timed by the worker\'s CUDA events', G, async () => {
    const report = await bench(['--candidates', DEMO, '--keep-going', '--iters', '100']);
    const status = (task: string) => report.summary.tasks.find((t) => t.task === task)?.status;
    const details = (task: string) => report.results.filter((x) => x.task === task).map((x) => x.detail ?? '').join('\n');
    expect(report.complete).toBe(true);
    expect(status('L1/rms_norm'), details('L1/rms_norm')).toBe('PASSED');
    expect(status('L1/silu_and_mul'), details('L1/silu_and_mul')).toBe('INCORRECT_NUMERICAL');
    expect(status('L1/relu')).toBe('RUNTIME_ERROR');
    expect(details('L1/relu')).toMatch(/relu\.py:17: IndexError/);
    for (const x of report.results.filter((y) => y.task === 'L1/rms_norm')) expect(x.checks).toContain('worker-clock');
  });

  it('the torch stubs (reference PyTorch ops) pass as written at the production shapes', G, async () => {
    const out = mkdtempSync(join(tmpdir(), 'fk-torch-stub-'));
    const s = await startCli(['stubs', '--lang', 'torch', '--out', out, '--task', 'L1/silu_and_mul,L1/rms_norm,L1/relu']).result;
    expect(s.code, s.stderr).toBe(0);
    const report = await bench(['--candidates', out, '--shapes', 'production', '--iters', '100']);
    for (const x of report.results) expect(x.status, `${x.task} ${x.case}: ${x.detail}`).toBe('PASSED');
  });

  it('the worker adds no hidden cost: its time for the reference op is PyTorch\'s own CUDA-event time within 5% (issue 30)', G, async () => {
    const out = mkdtempSync(join(tmpdir(), 'fk-torch-timing-'));
    const s = await startCli(['stubs', '--lang', 'torch', '--out', out, '--task', 'L1/rms_norm']).result;
    expect(s.code, s.stderr).toBe(0);
    const report = await bench(['--candidates', out, '--shapes', 'production', '--iters', '200']);
    // the interpreter (so the torch) the worker runs: the first of its list that imports torch
    const python = pythonCandidates(process.env).find((p) => spawnSync(p, ['-c', 'import torch'], { timeout: 60_000 }).status === 0)!;
    const rows: string[] = [];
    const off: string[] = [];
    for (const x of report.results) {
      expect(x.status, `${x.case}: ${x.detail}`).toBe('PASSED');
      const [T, H] = [x.case.includes('decode') ? 32 : x.case.includes('first-layer') ? 1024 : 4096, 4096];
      const r = spawnSync(python, ['-c', TIMING, join(out, 'L1', 'rms_norm.py'), String(T), String(H), x.case.includes('first-layer') ? '0' : '1'], { encoding: 'utf8', timeout: 300_000 });
      expect(r.status, r.stderr).toBe(0);
      const own = Number(r.stdout.trim());
      const row = `${x.case}: the bench says ${x.candidateMs} ms (host ${x.hostMs} ms), PyTorch's own events ${own} ms (${((x.candidateMs! / own - 1) * 100).toFixed(1)}%)`;
      rows.push(row);
      if (!(Math.abs(x.candidateMs! / own - 1) < 0.05)) off.push(row);
    }
    // every case measured before judging, so one run shows whether only the launch-bound (decode) case is off
    console.log(`worker vs PyTorch's own CUDA events (${python}):\n  ${rows.join('\n  ')}`);
    expect(off, rows.join('\n')).toEqual([]);
  });

  it('where the worker\'s extra time comes from: the timing loop with IPC inputs and a flush in another process (printed, no asserts)', G, async () => {
    const out = mkdtempSync(join(tmpdir(), 'fk-torch-gap-'));
    const s = await startCli(['stubs', '--lang', 'torch', '--out', out, '--task', 'L1/rms_norm']).result;
    expect(s.code, s.stderr).toBe(0);
    const script = join(out, 'gap_split.py');
    writeFileSync(script, GAP_SPLIT);
    const python = pythonCandidates(process.env).find((p) => spawnSync(p, ['-c', 'import torch'], { timeout: 60_000 }).status === 0)!;
    const rows: string[] = [];
    for (const T of [32, 1024]) {
      const r = spawnSync(python, [script, join(out, 'L1', 'rms_norm.py'), String(T), '4096'], { encoding: 'utf8', timeout: 300_000 });
      expect(r.status, r.stderr).toBe(0);
      rows.push(...r.stdout.trim().split('\n').map((l) => `T ${T} ${l}`));
    }
    console.log(`the timing loop under the worker's conditions, one at a time (${python}):\n  ${rows.join('\n  ')}`);
  });

  it('py-side-stream: work left on a side stream is caught by the escape check', G, async () => {
    // production shapes: the side stream's work must outlast the launches (which the events see too)
    const report = await bench(['--candidates', SIDE_STREAM, '--shapes', 'production', '--iters', '50']);
    const rows = report.results.filter((x) => x.task === 'L1/rms_norm');
    expect(rows.some((x) => x.status === 'REWARD_HACK' && /work escaped the timed window/.test(x.detail ?? '')), JSON.stringify(rows.map((x) => [x.case, x.status, x.detail]))).toBe(true);
  });
});
