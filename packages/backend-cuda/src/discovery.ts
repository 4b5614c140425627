/**
 * Where the CUDA libraries and headers are looked for, in order. Pure functions over an injected
 * environment and file system, so the search order is unit-tested without CUDA.
 *
 * Order for a library (first that dlopens wins):
 *  1. every directory in FASTKERNELS_CUDA_LIB_DIRS (colon-separated): an explicit choice wins;
 *  2. the bare soname, resolved by the system loader (LD_LIBRARY_PATH, ld.so.cache, RUNPATH);
 *  3. $CUDA_HOME / $CUDA_PATH / $CUDA_ROOT lib64 and lib;
 *  4. /usr/local/cuda/lib64, /usr/local/cuda-* /lib64 (newest first), the distro's multiarch folders;
 *  5. Python site-packages: nvidia/cu13/lib, nvidia/<component>/lib, for $VIRTUAL_ENV, $CONDA_PREFIX,
 *     /opt/* /.venv, /usr/local/lib/python3*, /usr/lib/python3*, ~/.local/lib/python3*.
 * cuDNN (optional: the conv ops fall back to their own kernel without it) is searched in the same places, PyTorch's
 * nvidia/cudnn/lib among them; cudnnCandidates also lists the sub-libraries to preload next to each candidate.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { setting } from '@fastkernels/core';

export type CudaLibraryKind = 'cuda' | 'nvrtc' | 'cublasLt';

/** The file-system view discovery needs (real by default; a fake in tests). */
export interface DiscoveryFs {
  exists(path: string): boolean;
  /** Entry names of a directory, [] when it does not exist. */
  list(dir: string): string[];
}

export interface DiscoveryEnv {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly fs: DiscoveryFs;
  readonly home: string;
}

export const realFs: DiscoveryFs = {
  exists: (p) => existsSync(p),
  list: (d) => {
    try {
      return statSync(d).isDirectory() ? readdirSync(d) : [];
    } catch {
      return [];
    }
  },
};

export function defaultDiscoveryEnv(): DiscoveryEnv {
  return { env: process.env, fs: realFs, home: homedir() };
}

/** Sonames to try per library, newest first (the bundle targets CUDA 13; 12 works with a 13 driver too). */
export const LIBRARY_NAMES: Readonly<Record<CudaLibraryKind, readonly string[]>> = {
  cuda: ['libcuda.so.1', 'libcuda.so'],
  nvrtc: ['libnvrtc.so.13', 'libnvrtc.so.12', 'libnvrtc.so'],
  cublasLt: ['libcublasLt.so.13', 'libcublasLt.so.12', 'libcublasLt.so'],
};

const sortVersionsDesc = (names: string[]): string[] =>
  [...names].sort((a, b) => b.localeCompare(a, 'en', { numeric: true }));

/** Expand one `*` per path segment against the fake or real file system (matches are sorted, newest first). */
export function globDirs(pattern: string, fs: DiscoveryFs): string[] {
  const parts = pattern.split('/');
  let bases = [parts[0] === '' ? '/' : parts[0]!];
  for (const part of parts.slice(1)) {
    if (part === '') continue;
    const next: string[] = [];
    for (const base of bases) {
      if (!part.includes('*')) {
        next.push(join(base, part));
        continue;
      }
      const re = new RegExp('^' + part.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$');
      for (const name of sortVersionsDesc(fs.list(base).filter((n) => re.test(n)))) next.push(join(base, name));
    }
    bases = next;
  }
  return bases.filter((d) => fs.list(d).length > 0 || fs.exists(d));
}

/** Python site-packages folders that may hold NVIDIA wheels (nvidia/cu13, nvidia/cuda_nvrtc, nvidia/cublas, ...). */
export function sitePackagesDirs(de: DiscoveryEnv): string[] {
  const { env, fs, home } = de;
  const patterns: string[] = [];
  for (const prefix of [env.VIRTUAL_ENV, env.CONDA_PREFIX]) {
    if (prefix) patterns.push(`${prefix}/lib/python3*/site-packages`);
  }
  patterns.push(
    '/opt/*/.venv/lib/python3*/site-packages',
    '/opt/*/lib/python3*/site-packages',
    '/usr/local/lib/python3*/dist-packages',
    '/usr/local/lib/python3*/site-packages',
    '/usr/lib/python3/dist-packages',
    '/usr/lib/python3*/site-packages',
    '/usr/lib/python3*/dist-packages',
    `${home}/.local/lib/python3*/site-packages`,
  );
  const out: string[] = [];
  for (const p of patterns) for (const d of globDirs(p, fs)) if (!out.includes(d)) out.push(d);
  return out;
}

/** NVIDIA wheel folders below site-packages, cu13 (the CUDA 13 all-in-one wheel) first. */
function nvidiaWheelDirs(de: DiscoveryEnv, sub: 'lib' | 'include'): string[] {
  const out: string[] = [];
  for (const sp of sitePackagesDirs(de)) {
    const root = join(sp, 'nvidia');
    const comps = de.fs.list(root);
    const ordered = [...comps.filter((c) => c === 'cu13'), ...comps.filter((c) => c === 'cu12'), ...comps.filter((c) => c !== 'cu13' && c !== 'cu12').sort()];
    for (const c of ordered) {
      const d = join(root, c, sub);
      if (de.fs.list(d).length > 0) out.push(d);
    }
  }
  return out;
}

/** Directories searched for a library, in order (the bare soname is tried between the override and these). */
export function libraryDirs(de: DiscoveryEnv): { overrides: string[]; dirs: string[] } {
  const { env, fs } = de;
  const overrides = setting('FASTKERNELS_CUDA_LIB_DIRS', env) ?? [];
  const dirs: string[] = [];
  const add = (d: string | undefined) => {
    if (d && !dirs.includes(d) && !overrides.includes(d)) dirs.push(d);
  };
  for (const root of [env.CUDA_HOME, env.CUDA_PATH, env.CUDA_ROOT]) {
    if (!root) continue;
    add(join(root, 'lib64'));
    add(join(root, 'lib'));
    add(join(root, 'targets/x86_64-linux/lib'));
  }
  add('/usr/local/cuda/lib64');
  add('/usr/local/cuda/targets/x86_64-linux/lib');
  for (const d of globDirs('/usr/local/cuda-*', fs)) add(join(d, 'lib64'));
  add('/usr/lib/x86_64-linux-gnu');
  add('/usr/lib64');
  add('/usr/local/nvidia/lib64');
  add('/usr/lib/wsl/lib');
  for (const d of nvidiaWheelDirs(de, 'lib')) add(d);
  return { overrides, dirs };
}

export interface LibraryCandidates {
  /** dlopen arguments in order: absolute paths and bare sonames. */
  readonly candidates: string[];
  /** Directories that were considered but hold none of the names (listed in the error). */
  readonly searchedDirs: string[];
  /** Libraries to preload with RTLD_GLOBAL before the candidates (libnvrtc-builtins next to libnvrtc). */
  readonly preload: string[];
}

/** The ordered dlopen candidates for one library. Absolute paths are listed only when the file exists. */
export function libraryCandidates(kind: CudaLibraryKind, de: DiscoveryEnv = defaultDiscoveryEnv()): LibraryCandidates {
  const names = LIBRARY_NAMES[kind];
  const { overrides, dirs } = libraryDirs(de);
  const candidates: string[] = [];
  const searchedDirs: string[] = [];
  const preload: string[] = [];
  const fromDir = (d: string) => {
    let hit = false;
    for (const n of names) {
      const p = join(d, n);
      if (de.fs.exists(p)) {
        candidates.push(p);
        hit = true;
      }
    }
    if (!hit) searchedDirs.push(d);
    if (hit && kind === 'nvrtc') {
      // NVRTC loads libnvrtc-builtins by soname; when it lives outside the loader path, preload it.
      for (const f of sortVersionsDesc(de.fs.list(d).filter((f) => /^libnvrtc-builtins\.so\.\d+/.test(f)))) preload.push(join(d, f));
    }
  };
  overrides.forEach(fromDir);
  // When the user pinned directories, only those are searched.
  if (overrides.length === 0) {
    candidates.push(...names);
    dirs.forEach(fromDir);
  }
  // Never the driver stub (it loads, then cuInit fails with CUDA_ERROR_STUB_LIBRARY).
  return { candidates: candidates.filter((c) => !c.includes('/stubs/')), searchedDirs, preload };
}

/** Include directories for NVRTC: the first folder holding cuda_fp16.h/cuda_bf16.h, plus its CCCL folder. */
export function cudaIncludeDirs(de: DiscoveryEnv = defaultDiscoveryEnv()): { found: string[]; searched: string[] } {
  const { env, fs } = de;
  const cands: string[] = [];
  const add = (d: string | undefined) => {
    if (d && !cands.includes(d)) cands.push(d);
  };
  for (const d of setting('FASTKERNELS_CUDA_INCLUDE_DIRS', env) ?? []) add(d);
  for (const root of [env.CUDA_HOME, env.CUDA_PATH, env.CUDA_ROOT]) {
    if (!root) continue;
    add(join(root, 'include'));
    add(join(root, 'targets/x86_64-linux/include'));
  }
  add('/usr/local/cuda/include');
  add('/usr/local/cuda/targets/x86_64-linux/include');
  for (const d of globDirs('/usr/local/cuda-*', fs)) add(join(d, 'include'));
  for (const d of nvidiaWheelDirs(de, 'include')) add(d);
  add('/usr/include');
  const found: string[] = [];
  for (const d of cands) {
    if (fs.exists(join(d, 'cuda_fp16.h')) && fs.exists(join(d, 'cuda_bf16.h'))) {
      found.push(d);
      // CUDA 13 moved CCCL (cuda/std, nv/target) under include/cccl.
      if (fs.exists(join(d, 'cccl'))) found.push(join(d, 'cccl'));
      break;
    }
  }
  return { found, searched: cands };
}

/** The human-readable "not found" message: every place tried, with the loader's reason. */
export function formatNotFound(
  kind: CudaLibraryKind,
  tried: readonly { path: string; error: string }[],
  searchedDirs: readonly string[],
): string {
  const soname = LIBRARY_NAMES[kind][0]!;
  const lines = tried.map((t) => `${t.path} (${t.error.replace(/^.*?: /, '')})`);
  const dirs = searchedDirs.length ? `; no ${LIBRARY_NAMES[kind].join('/')} in: ${searchedDirs.join(', ')}` : '';
  return `${soname} not found (tried: ${lines.join('; ') || 'nothing'}${dirs}). Set FASTKERNELS_CUDA_LIB_DIRS=<dir>[:<dir>...] to point at it.`;
}

// ---------------------------------------------------------------------------------------------------- cuDNN

/** cuDNN's sonames, newest first (9 splits into sub-libraries; the legacy conv API is served by all 9.x). */
export const CUDNN_NAMES: readonly string[] = ['libcudnn.so.9'];

export interface CudnnCandidates {
  /** dlopen arguments in order: bare sonames, then absolute paths that exist. */
  readonly candidates: string[];
  /**
   * Per candidate: cuDNN 9's sub-libraries in its folder (libcudnn_graph first), which the libcudnn.so.9 shim opens by
   * soname and so cannot find outside the loader's path; the addon preloads them RTLD_GLOBAL before the candidate.
   */
  readonly preloads: string[][];
  /** Folders considered that hold no libcudnn.so.9 (listed in the not-found message). */
  readonly searchedDirs: string[];
}

/** libcudnn_<part>.so.9 files of a folder, graph first (every other part needs it), the rest by name. */
export function cudnnSubLibraries(dir: string, fs: DiscoveryFs): string[] {
  const subs = fs.list(dir).filter((f) => /^libcudnn_[a-z0-9_]+\.so\.9$/.test(f)).sort();
  return [...subs.filter((f) => f.startsWith('libcudnn_graph.')), ...subs.filter((f) => !f.startsWith('libcudnn_graph.'))].map((f) => join(dir, f));
}

/** Where libcudnn.so.9 is looked for: the places of the other libraries (libraryDirs), PyTorch's nvidia/cudnn/lib among them. */
export function cudnnCandidates(de: DiscoveryEnv = defaultDiscoveryEnv()): CudnnCandidates {
  const { overrides, dirs } = libraryDirs(de);
  const candidates: string[] = [];
  const preloads: string[][] = [];
  const searchedDirs: string[] = [];
  const fromDir = (d: string) => {
    const hits = CUDNN_NAMES.map((n) => join(d, n)).filter((p) => de.fs.exists(p));
    if (hits.length === 0) searchedDirs.push(d);
    for (const p of hits) {
      candidates.push(p);
      preloads.push(cudnnSubLibraries(d, de.fs));
    }
  };
  overrides.forEach(fromDir);
  if (overrides.length === 0) {
    for (const n of CUDNN_NAMES) {
      candidates.push(n);
      preloads.push([]); // on the loader's path the shim finds its sub-libraries itself
    }
    dirs.forEach(fromDir);
  }
  return { candidates, preloads, searchedDirs };
}

/** "cuDNN not found: tried ..." with the loader's reason per place, and the folders that held no libcudnn.so.9. */
export function formatCudnnNotFound(tried: readonly { path: string; error: string }[], searchedDirs: readonly string[]): string {
  const lines = tried.map((t) => `${t.path} (${t.error.replace(/^.*?: (?=cannot open)/, '')})`);
  const dirs = searchedDirs.length ? `; no ${CUDNN_NAMES.join('/')} in: ${searchedDirs.join(', ')}` : '';
  return `cuDNN not found: tried ${lines.join('; ') || 'nothing'}${dirs}. The conv ops use their own implicit-GEMM kernel instead; set FASTKERNELS_CUDA_LIB_DIRS=<dir> to point at cuDNN.`;
}
