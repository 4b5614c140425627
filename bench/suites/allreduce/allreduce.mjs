#!/usr/bin/env node
// All-reduce bus bandwidth of backend-nccl (issue 10): in-place all-reduce of 1 MiB ... 1 GiB on N GPUs, timed
// with CUDA events on rank 0 (warm-up, then back-to-back calls; the average per call), reported like nccl-tests:
// algBw = bytes / time, busBw = algBw * 2 (n - 1) / n. bench/allreduce_torch.py measures torch.distributed
// (NCCL) the same way; bench/suites/allreduce/run.sh runs both and compares.
// Run without RANK it launches itself on --nproc ranks (launch(), one process per GPU); as a rank it measures.
//   dist/gpu-host/run-node bench/suites/allreduce/allreduce.mjs [--nproc 2] [--json out.json] [--dtype bf16] [--quick]
import '../../lib/user-errors.mjs'; // first: a bad FASTKERNELS_* value is one line, not a stack
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CudaBackend, CudaRuntime } from '@fastkernels/backend-cuda';
import { initDistributed, launch, probeNccl } from '@fastkernels/backend-nccl';
import { Tensor } from '@fastkernels/core';

const args = process.argv.slice(2);
const opt = (name, dflt) => (args.includes(`--${name}`) ? args[args.indexOf(`--${name}`) + 1] : dflt);
const quick = args.includes('--quick');
const dtype = opt('dtype', 'bf16');
const itemsize = { bf16: 2, f16: 2, f32: 4 }[dtype];
if (!itemsize) throw new Error(`--dtype ${dtype}: bf16, f16 or f32`);
const MiB = 2 ** 20;
const sizes = [];
for (let b = MiB; b <= 1024 * MiB; b *= 2) sizes.push(b);

if (process.env.RANK === undefined) {
  // ---- the launcher side
  const nproc = Number(opt('nproc', '2'));
  const p = probeNccl();
  if (!p.available) {
    console.error(`bench-allreduce: NCCL unavailable: ${p.reason}`);
    process.exit(2);
  }
  console.log(`bench-allreduce: NCCL ${p.version} (${p.library}), ${nproc} ranks, ${dtype}`);
  const self = fileURLToPath(import.meta.url);
  const h = await launch({ nproc, command: process.execPath, args: ['--enable-source-maps', self, ...args] });
  const r = await h.result;
  process.exit(r.exitCode);
}

// ---- a rank
const t0 = performance.now();
const d = await initDistributed({ timeoutMs: 120_000 });
const backend = new CudaBackend();
const rt = CudaRuntime.get();
const addon = rt.addon;
const n = d.world;
const buf = Tensor.empty(backend, [sizes[sizes.length - 1] / itemsize], dtype, { device: d.device });
backend.ops.fill(buf, 1 / 1024);
d.comm.synchronize();
const e0 = rt.acquireEvent();
const e1 = rt.acquireEvent();
const rows = [];
for (const bytes of sizes) {
  const count = bytes / itemsize;
  const ptr = buf.storage.devicePtr;
  const run = () => d.comm.allReducePtr(ptr, ptr, count, dtype, 'sum');
  const iters = quick ? 10 : bytes <= 64 * MiB ? 50 : 20;
  for (let i = 0; i < 5; i++) run();
  d.comm.synchronize();
  const samples = [];
  for (let rep = 0; rep < 3; rep++) {
    addon.eventRecord(e0, rt.stream);
    for (let i = 0; i < iters; i++) run();
    addon.eventRecord(e1, rt.stream);
    d.comm.synchronize();
    samples.push(addon.eventElapsed(e0, e1) / iters);
  }
  const ms = Math.min(...samples);
  const algBw = bytes / (ms / 1e3) / 1e9;
  rows.push({ bytes, ms, algBwGBps: algBw, busBwGBps: (algBw * 2 * (n - 1)) / n });
}
const probe = probeNccl();
if (d.rank === 0) {
  console.log(`${'size'.padStart(10)} ${'us'.padStart(10)} ${'algBw GB/s'.padStart(11)} ${'busBw GB/s'.padStart(11)}`);
  for (const r of rows) console.log(`${(r.bytes / MiB).toFixed(0).padStart(8)}MB ${(r.ms * 1e3).toFixed(1).padStart(10)} ${r.algBwGBps.toFixed(1).padStart(11)} ${r.busBwGBps.toFixed(1).padStart(11)}`);
  const json = opt('json');
  const report = {
    world: n,
    dtype,
    nccl: { version: probe.version, library: probe.library, nonBlocking: probe.nonBlocking },
    device: rt.properties().name,
    driver: rt.driverVersion,
    env: { NCCL_NVLS_ENABLE: process.env.NCCL_NVLS_ENABLE ?? null, NCCL_ALGO: process.env.NCCL_ALGO ?? null, NCCL_PROTO: process.env.NCCL_PROTO ?? null },
    rows,
    seconds: (performance.now() - t0) / 1000,
  };
  if (json) writeFileSync(json, JSON.stringify(report, null, 2));
}
d.comm.destroy({ timeoutMs: 60_000 });
process.exit(0);
