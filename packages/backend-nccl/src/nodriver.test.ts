/**
 * "NCCL found, no driver": a stand-in libnccl.so.2 (every entry point the addon resolves, ncclGetVersion = 2.27.3)
 * compiled here, pinned with FASTKERNELS_NCCL_LIB_DIRS. Its own file: the addon keeps what it loaded per process.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { probeNccl } from './nccl.js';

const cxx = ['g++', 'c++', 'cc'].find((c) => {
  try {
    execFileSync(c, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
});
const driverPresent = existsSync('/dev/nvidiactl');

const FAKE = `
extern "C" {
int ncclGetVersion(int* v) { *v = 22703; return 0; }
${['ncclGetUniqueId', 'ncclCommInitRank', 'ncclCommDestroy', 'ncclCommAbort', 'ncclCommGetAsyncError', 'ncclCommCount', 'ncclCommCuDevice', 'ncclCommUserRank', 'ncclAllReduce', 'ncclBroadcast', 'ncclReduceScatter', 'ncclAllGather', 'ncclSend', 'ncclRecv', 'ncclGroupStart', 'ncclGroupEnd', 'ncclCommInitRankConfig']
  .map((f) => `int ${f}() { return 0; }`)
  .join('\n')}
const char* ncclGetErrorString(int) { return "fake"; }
}`;

describe('NCCL present, CUDA driver absent', () => {
  it.skipIf(!cxx || driverPresent)('reports "no driver" without throwing, after naming the NCCL it found', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fk-fake-nccl-'));
    writeFileSync(join(dir, 'fake.cc'), FAKE);
    execFileSync(cxx!, ['-shared', '-fPIC', '-o', join(dir, 'libnccl.so.2'), join(dir, 'fake.cc')]);
    process.env.FASTKERNELS_NCCL_LIB_DIRS = dir;
    const p = probeNccl();
    expect(p.available).toBe(false);
    expect(p.version).toBe('2.27.3');
    expect(p.library).toBe(join(dir, 'libnccl.so.2'));
    expect(p.nonBlocking).toBe(true);
    expect(p.reason).toMatch(/^NCCL 2\.27\.3 \(.*libnccl\.so\.2\) found, but CUDA is not usable: libcuda\.so\.1 not found \(tried: /);
  });
});
