/**
 * What the ranks of nccl.gpu.test.ts run (one process per GPU, started through launch()). Each rank writes
 * FK_TEST_OUT/rank-<r>.json: { ok, checks } or { ok: false, error }. Not part of the public API.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CudaBackend } from '@fastkernels/backend-cuda';
import { CpuBackend } from '@fastkernels/backend-cpu';
import { Tensor, TensorParallelGroup, type DType } from '@fastkernels/core';
import { initDistributed, type Distributed } from '../distributed.js';
import { NcclTimeoutError } from '../errors.js';

type Checks = Record<string, unknown>;

function seq(n: number, f: (i: number) => number): number[] {
  return Array.from({ length: n }, (_, i) => f(i));
}

function expectEqual(name: string, got: number[], want: number[], tol = 0): void {
  if (got.length !== want.length) throw new Error(`${name}: ${got.length} values, expected ${want.length}`);
  for (let i = 0; i < got.length; i++) {
    if (!(Math.abs(got[i]! - want[i]!) <= tol)) throw new Error(`${name}: [${i}] = ${got[i]}, expected ${want[i]}`);
  }
}

function collectives(d: Distributed, checks: Checks): void {
  const cuda = new CudaBackend();
  const { rank: r, world: w, comm, device } = d;
  const T = (data: number[], shape: number[], dtype: DType = 'f32') => Tensor.fromArray(cuda, data, shape, dtype, { device });
  const read = (t: Tensor) => {
    comm.synchronize({ timeoutMs: 60_000 });
    return [...t.toFloat64Array()];
  };

  for (const dtype of ['f32', 'bf16', 'i32'] as DType[]) {
    const n = 4099;
    const x = T(seq(n, (i) => ((i % 13) - 6) * (r + 1)), [n], dtype);
    comm.allReduce(x);
    const tri = (w * (w + 1)) / 2;
    expectEqual(`allReduce ${dtype}`, read(x), seq(n, (i) => ((i % 13) - 6) * tri));
    checks[`allReduce_${dtype}`] = true;
  }
  const big = T(seq(1 << 22, () => r + 1), [1 << 22]); // 16 MiB: the large-message algorithms
  comm.allReduce(big, { op: 'max' });
  expectEqual('allReduce max 16MiB', read(big).slice(0, 8), seq(8, () => w));
  checks.allReduceMax16MiB = true;

  const g = comm.allGather(T(seq(4, (i) => r * 10 + i), [4]));
  expectEqual('allGather', read(g), seq(4 * w, (k) => Math.floor(k / 4) * 10 + (k % 4)));
  checks.allGather = true;

  const rs = comm.reduceScatter(T(seq(3 * w, (i) => r + i), [3 * w]));
  expectEqual('reduceScatter', read(rs), seq(3, (j) => seq(w, (q) => q + r * 3 + j).reduce((a, b) => a + b, 0)));
  checks.reduceScatter = true;

  const root = w - 1;
  const b = T(seq(5, (i) => r * 100 + i), [5]);
  comm.broadcast(b, root);
  expectEqual('broadcast', read(b), seq(5, (i) => root * 100 + i));
  checks.broadcast = true;

  const a2a = comm.allToAll(T(seq(2 * w, (k) => r * 100 + Math.floor(k / 2) * 10 + (k % 2)), [2 * w]));
  expectEqual('allToAll', read(a2a), seq(2 * w, (k) => Math.floor(k / 2) * 100 + r * 10 + (k % 2)));
  checks.allToAll = true;

  // Core's tensor-parallel group over this communicator, as model-zoo's parallel layers use it (RowParallelLinear: a
  // GEMM over this rank's input columns, then the group's all-reduce; ColumnParallelLinear with gatherOutput: a GEMM
  // over this rank's output rows, then the group's all-gather), equals the unsharded linear (computed on the CPU
  // backend). The layers themselves live in model-zoo (which this package does not import); their CPU group tests are
  // test/tensor-parallel.test.ts, their GPU runs `bench --tp 2` (bench/suites/verify-tp).
  const cpu = new CpuBackend();
  const K = 64, N = 32, M = 5;
  const xs = seq(M * K, (i) => Math.sin(i) / 4);
  const ws = seq(N * K, (i) => Math.cos(i * 0.7) / 8);
  const bs = seq(N, (i) => i / 16);
  const full = cpu.ops.linear(Tensor.fromArray(cpu, xs, [M, K], 'f32'), Tensor.fromArray(cpu, ws, [N, K], 'f32'), Tensor.fromArray(cpu, bs, [N], 'f32'));
  const want = [...full.toFloat64Array()];
  const group = TensorParallelGroup.of(d);
  const nPart = N / w;
  const x = T(xs, [M, K]);
  const wFull = T(ws, [N, K]);
  // row parallel: input columns and weight columns [r K / W, (r + 1) K / W); the bias on rank 0 only
  const xCols = group.split(x, -1);
  const wCols = group.split(wFull, -1).contiguous();
  const rowOut = cuda.ops.linear(xCols.contiguous(), wCols, r === 0 ? T(bs, [N]) : null);
  expectEqual('RowParallelLinear', read(group.allReduce_(rowOut)), want, 1e-4);
  // column parallel with gatherOutput: weight rows and bias [r N / W, (r + 1) N / W), outputs all-gathered
  const wRows = T(ws.slice(r * nPart * K, (r + 1) * nPart * K), [nPart, K]);
  const colOut = group.allGather(cuda.ops.linear(x, wRows, T(bs.slice(r * nPart, (r + 1) * nPart), [nPart])), -1);
  expectEqual('ColumnParallelLinear gather', read(colOut), want, 1e-4);
  checks.parallelLinear = true;
}

async function abortOnStoppedPeer(d: Distributed, checks: Checks, out: string): Promise<void> {
  const cuda = new CudaBackend();
  const x = Tensor.fromArray(cuda, seq(1024, () => 1), [1024], 'f32', { device: d.device });
  d.comm.allReduce(x);
  d.comm.synchronize({ timeoutMs: 60_000 }); // both ranks are alive here
  if (d.rank === 1) {
    // the peer that stops: it never joins the next collective and leaves once rank 0 has reported
    const t0 = Date.now();
    while (!existsSync(join(out, 'rank-0.json')) && Date.now() - t0 < 60_000) await new Promise((r) => setTimeout(r, 100));
    checks.stopped = true;
    return;
  }
  const t0 = Date.now();
  try {
    d.comm.allReduce(x);
    d.comm.synchronize({ timeoutMs: 3000 });
    checks.error = 'no error: the all-reduce completed without the peer';
  } catch (e) {
    checks.timeout = e instanceof NcclTimeoutError;
    checks.message = (e as Error).message;
    checks.seconds = (Date.now() - t0) / 1000;
    checks.aborted = d.comm.isAborted;
    try {
      d.comm.allReduce(x);
    } catch (e2) {
      checks.afterAbort = (e2 as Error).message;
    }
  }
}

/** Run the scenario named by FK_NCCL_SCENARIO on this rank and exit. */
export async function runGpuScenario(): Promise<never> {
  const out = process.env.FK_TEST_OUT!;
  const rank = Number(process.env.RANK ?? 0);
  const checks: Checks = {};
  let report: Record<string, unknown>;
  try {
    const d = await initDistributed({ timeoutMs: 60_000 });
    checks.device = d.device;
    checks.commDevice = d.comm.device;
    if (process.env.FK_NCCL_SCENARIO === 'abort') await abortOnStoppedPeer(d, checks, out);
    else collectives(d, checks);
    if (!d.comm.isAborted) d.comm.destroy({ timeoutMs: 30_000 });
    report = { ok: true, rank, checks };
  } catch (e) {
    report = { ok: false, rank, checks, error: (e as Error).stack ?? String(e) };
  }
  writeFileSync(join(out, `rank-${rank}.json`), JSON.stringify(report));
  process.exit(0);
}
