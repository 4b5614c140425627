/**
 * Where libnccl.so.2 is looked for, in order (first that dlopens wins; the error lists every place tried):
 *  1. every directory in FASTKERNELS_NCCL_LIB_DIRS (colon-separated): when set, ONLY these are searched;
 *  2. the bare soname, resolved by the system loader (LD_LIBRARY_PATH, ld.so.cache);
 *  3. $NCCL_HOME / $NCCL_ROOT / $NCCL_DIR (lib, lib64);
 *  4. Python site-packages nvidia/nccl/lib (the nvidia-nccl-cu1x wheel PyTorch uses), for $VIRTUAL_ENV,
 *     $CONDA_PREFIX, /opt/* /.venv, /usr/local/lib/python3*, /usr/lib/python3*, ~/.local/lib/python3*;
 *  5. the CUDA library folders backend-cuda searches ($CUDA_HOME, /usr/local/cuda*, the multiarch folders,
 *     the other NVIDIA wheels).
 * Pure over an injected environment and file system (backend-cuda's DiscoveryEnv), so it is unit-tested here.
 */
import { join } from 'node:path';
import { defaultDiscoveryEnv, libraryDirs, sitePackagesDirs, type DiscoveryEnv } from '@fastkernels/backend-cuda';
import { setting } from '@fastkernels/core';

export const NCCL_SONAMES = ['libnccl.so.2', 'libnccl.so'] as const;

/** The real process environment and file system (backend-cuda's discovery environment). */
export function ncclDiscoveryEnv(): DiscoveryEnv {
  return defaultDiscoveryEnv();
}

export interface NcclCandidates {
  /** dlopen arguments in order: absolute paths (only files that exist) and bare sonames. */
  readonly candidates: string[];
  /** Directories considered that hold no libnccl (listed in the error). */
  readonly searchedDirs: string[];
}

export function ncclLibraryDirs(de: DiscoveryEnv): { overrides: string[]; dirs: string[] } {
  const { env } = de;
  const overrides = setting('FASTKERNELS_NCCL_LIB_DIRS', env) ?? [];
  const dirs: string[] = [];
  const add = (d: string | undefined) => {
    if (d && !dirs.includes(d) && !overrides.includes(d)) dirs.push(d);
  };
  for (const root of [env.NCCL_HOME, env.NCCL_ROOT, env.NCCL_DIR]) {
    if (!root) continue;
    add(join(root, 'lib'));
    add(join(root, 'lib64'));
  }
  for (const sp of sitePackagesDirs(de)) {
    const d = join(sp, 'nvidia', 'nccl', 'lib');
    if (de.fs.list(d).length > 0) add(d);
  }
  // backend-cuda's folders, without its own override variable (that one pins the CUDA libraries, not NCCL).
  const { FASTKERNELS_CUDA_LIB_DIRS: _pinned, ...rest } = env;
  for (const d of libraryDirs({ ...de, env: rest }).dirs) add(d);
  return { overrides, dirs };
}

export function ncclLibraryCandidates(de: DiscoveryEnv = ncclDiscoveryEnv()): NcclCandidates {
  const { overrides, dirs } = ncclLibraryDirs(de);
  const candidates: string[] = [];
  const searchedDirs: string[] = [];
  const fromDir = (d: string) => {
    let hit = false;
    for (const n of NCCL_SONAMES) {
      const p = join(d, n);
      if (de.fs.exists(p)) {
        candidates.push(p);
        hit = true;
      }
    }
    if (!hit) searchedDirs.push(d);
  };
  overrides.forEach(fromDir);
  if (overrides.length === 0) {
    candidates.push(NCCL_SONAMES[0]);
    dirs.forEach(fromDir);
  }
  return { candidates, searchedDirs };
}

/** "libnccl.so.2 not found (tried: ...; no libnccl in: ...)": every place tried, with the loader's reason. */
export function formatNcclNotFound(tried: readonly { path: string; error: string }[], searchedDirs: readonly string[]): string {
  const lines = tried.map((t) => `${t.path} (${t.error.replace(/^.*?: (?=[^:]*$)/, '')})`);
  const dirs = searchedDirs.length ? `; no ${NCCL_SONAMES.join('/')} in: ${searchedDirs.join(', ')}` : '';
  return (
    `libnccl.so.2 not found (tried: ${lines.join('; ') || 'nothing'}${dirs}). ` +
    'Install NCCL (or the nvidia-nccl-cu13 wheel), or set FASTKERNELS_NCCL_LIB_DIRS=<dir>[:<dir>...] to point at it.'
  );
}
