/** Loading cuDNN through a fake addon: candidates passed on, the answer cached, versions and doctor's entries. */
import { afterEach, describe, expect, it } from 'vitest';
import type { DiscoveryEnv } from '../../discovery.js';
import { cudnnState, cudnnVersionEntries, formatCudnnVersion, loadCudnn, resetCudnnState, type CudnnAddon } from './cudnn-library.js';

const NONE: DiscoveryEnv = { env: {}, fs: { exists: () => false, list: () => [] }, home: '/root' };

function fakeAddon(result: ReturnType<CudnnAddon['cudnnLoad']>): CudnnAddon & { loads: unknown[][] } {
  const loads: unknown[][] = [];
  return {
    loads,
    cudnnLoad: (c: string[], p: string[][]) => {
      loads.push([c, p]);
      return result;
    },
  } as unknown as CudnnAddon & { loads: unknown[][] };
}

describe('cuDNN loading', () => {
  afterEach(() => resetCudnnState());

  it('found: the version decoded, the file kept; loaded once per process', () => {
    const a = fakeAddon({ ok: true, path: '/w/nvidia/cudnn/lib/libcudnn.so.9', version: 91002, apis: ['graph', 'legacy'], tried: [] });
    expect(loadCudnn(a, NONE)).toEqual({ ok: true, path: '/w/nvidia/cudnn/lib/libcudnn.so.9', version: '9.10.2', apis: ['graph', 'legacy'] });
    loadCudnn(a, NONE);
    expect(a.loads).toHaveLength(1);
    expect(a.loads[0]).toEqual([['libcudnn.so.9'], [[]]]);
    expect(cudnnVersionEntries(cudnnState()!)).toEqual({ cudnn: '9.10.2', libcudnn: '/w/nvidia/cudnn/lib/libcudnn.so.9', cudnnConvApi: 'graph (legacy fallback)' });
  });

  it('the conv API doctor names: graph, graph only, or legacy (no backend API, or an addon that does not report it)', () => {
    const entry = (apis?: string[]) => {
      resetCudnnState();
      const s = loadCudnn(fakeAddon({ ok: true, path: '/l/libcudnn.so.9', version: 90600, tried: [], ...(apis ? { apis } : {}) }), NONE);
      return cudnnVersionEntries(s).cudnnConvApi;
    };
    expect([entry(['graph']), entry(['legacy']), entry()]).toEqual(['graph', 'legacy (no backend API)', 'legacy (no backend API)']);
  });

  it('absent: doctor prints what was tried and that convs use the fallback', () => {
    const a = fakeAddon({ ok: false, tried: [{ path: 'libcudnn.so.9', error: 'libcudnn.so.9: cannot open shared object file: No such file or directory' }] });
    const s = loadCudnn(a, NONE);
    expect(s.ok).toBe(false);
    expect(cudnnVersionEntries(s).cudnn).toMatch(/^unavailable: cuDNN not found: tried libcudnn\.so\.9 \(cannot open shared object file.*implicit-GEMM kernel instead/);
  });

  it('an addon built without cuDNN support says so instead of throwing', () => {
    expect(loadCudnn({} as CudnnAddon, NONE)).toEqual({ ok: false, reason: 'cuDNN: this build of the addon has no cuDNN support (rebuild it)' });
  });

  it('versions: cuDNN 9 and 8 encodings', () => {
    expect(formatCudnnVersion(90600)).toBe('9.6.0');
    expect(formatCudnnVersion(8907)).toBe('8.9.7');
  });
});

describe('the built addon on this machine', () => {
  it('loads without cuDNN present and answers with what it tried (or finds it)', async () => {
    const { tryLoadAddon } = await import('../../native.js');
    const { cudnnAddon } = await import('./cudnn-library.js');
    const { addon } = tryLoadAddon();
    if (!addon) return; // not built here: addon.test.ts reports that
    resetCudnnState();
    const s = loadCudnn(cudnnAddon(addon), NONE);
    if (!s.ok) expect(s.reason).toMatch(/^cuDNN not found: tried libcudnn\.so\.9 \(/);
    else expect(s.version).toMatch(/^9\./);
    resetCudnnState();
  });
});
