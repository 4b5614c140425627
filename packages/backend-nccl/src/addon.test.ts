import { describe, expect, it } from 'vitest';
import { formatNcclNotFound, ncclLibraryCandidates } from './discovery.js';
import { NcclError } from './errors.js';
import { formatNcclVersion, ncclAddon, NcclCommunicator, probeNccl } from './nccl.js';
import { ncclAddonCandidates, tryLoadNcclAddon } from './native.js';
import type { DiscoveryEnv } from '@fastkernels/backend-cuda';

const ncclHere = ncclLibraryCandidates().candidates.some((c) => c.startsWith('/'));

describe('NCCL addon on a CPU machine', () => {
  it('builds and loads (fastkernels_nccl.node)', () => {
    const r = tryLoadNcclAddon();
    expect(r.error).toBeUndefined();
    expect(r.addon?.abiVersion).toBe(1);
    expect(r.addon?.uniqueIdBytes).toBe(128);
    for (const f of ['allReduce', 'allGather', 'reduceScatter', 'broadcast', 'allToAll', 'commInitRank', 'commAbort', 'waitStream']) expect(typeof (r.addon as any)[f]).toBe('function');
  });

  it('looks in the env override, the package layout, the bundle layouts and beside the CUDA addon', () => {
    expect(ncclAddonCandidates('/x/dist', { FASTKERNELS_NCCL_ADDON: '/opt/n.node', FASTKERNELS_CUDA_ADDON: '/b/fastkernels_cuda.node' })).toEqual([
      '/opt/n.node',
      '/x/build/Release/fastkernels_nccl.node',
      '/x/dist/fastkernels_nccl.node',
      '/x/fastkernels_nccl.node',
      '/b/fastkernels_nccl.node',
    ]);
  });

  it('a missing library is reported with the loader error; calls before loading throw a usage error', () => {
    const { addon } = tryLoadNcclAddon();
    const r = addon!.loadLibrary('nccl', ['/nonexistent/libnccl.so.2']);
    expect(r.ok).toBe(false);
    expect(r.tried[0]).toMatchObject({ path: '/nonexistent/libnccl.so.2' });
    expect(r.tried[0]!.error).toMatch(/No such file/);
    if (!addon!.loaded().nccl) expect(() => addon!.getUniqueId()).toThrow(/libnccl is not loaded/);
    const d = addon!.loadLibrary('cuda', ['/nonexistent/libcuda.so.1']);
    if (!addon!.loaded().cuda) {
      expect(d.ok).toBe(false);
      expect(() => addon!.waitStream(0, 0, 1)).toThrow(/libcuda is not loaded/);
    }
  });

  it.skipIf(ncclHere)('reports "no NCCL" without throwing, listing every place tried', () => {
    const p = probeNccl();
    expect(p.available).toBe(false);
    expect(p.reason).toMatch(/^libnccl\.so\.2 not found \(tried: libnccl\.so\.2 \(/);
    expect(p.reason).toContain('FASTKERNELS_NCCL_LIB_DIRS');
    expect(() => ncclAddon()).toThrow(/NCCL is not available: libnccl\.so\.2 not found/);
    return expect(NcclCommunicator.init({ rank: 0, world: 1, id: new Uint8Array(128) })).rejects.toThrow(/NCCL is not available/);
  });

  it('formats versions and errors', () => {
    expect(formatNcclVersion(22703)).toBe('2.27.3');
    expect(formatNcclVersion(2708)).toBe('2.7.8');
    const e = new NcclError('ncclAllReduce', 6, 'ncclRemoteError', 'remote process exited', 'peer 1 closed', 'rank 0 of 2');
    expect(e.message).toBe('rank 0 of 2: ncclAllReduce failed: ncclRemoteError (6): remote process exited (NCCL: peer 1 closed)');
    expect(formatNcclNotFound([{ path: 'libnccl.so.2', error: 'libnccl.so.2: cannot open shared object file: No such file or directory' }], ['/a'])).toMatch(
      /^libnccl\.so\.2 not found \(tried: libnccl\.so\.2 \(No such file or directory\); no libnccl\.so\.2\/libnccl\.so in: \/a\)/,
    );
  });
});

function fakeEnv(env: Record<string, string>, files: string[]): DiscoveryEnv {
  const set = new Set(files);
  return {
    env,
    home: '/home/u',
    fs: {
      exists: (p) => set.has(p) || files.some((f) => f.startsWith(p + '/')),
      list: (d) => [...new Set(files.filter((f) => f.startsWith(d + '/')).map((f) => f.slice(d.length + 1).split('/')[0]!))],
    },
  };
}

describe('libnccl discovery', () => {
  const wheel = '/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2';
  it('tries the soname, $NCCL_HOME, the nvidia-nccl wheel, then the CUDA folders', () => {
    const c = ncclLibraryCandidates(fakeEnv({ NCCL_HOME: '/nccl' }, ['/nccl/lib/libnccl.so.2', wheel, '/usr/lib/x86_64-linux-gnu/libnccl.so.2', '/usr/lib/x86_64-linux-gnu/libc.so.6']));
    expect(c.candidates).toEqual(['libnccl.so.2', '/nccl/lib/libnccl.so.2', wheel, '/usr/lib/x86_64-linux-gnu/libnccl.so.2']);
    expect(c.searchedDirs).toContain('/usr/local/cuda/lib64');
  });

  it('FASTKERNELS_NCCL_LIB_DIRS pins the search to its folders', () => {
    const c = ncclLibraryCandidates(fakeEnv({ FASTKERNELS_NCCL_LIB_DIRS: '/pin:/empty' }, ['/pin/libnccl.so.2', wheel]));
    expect(c.candidates).toEqual(['/pin/libnccl.so.2']);
    expect(c.searchedDirs).toEqual(['/empty']);
  });
});
