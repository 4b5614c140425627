import { describe, expect, it } from 'vitest';
import { cudaIncludeDirs, cudnnCandidates, formatCudnnNotFound, formatNotFound, libraryCandidates, sitePackagesDirs, type DiscoveryEnv } from './discovery.js';

/** A fake file system from a list of files (directories are implied). */
function fakeFs(files: string[]): DiscoveryEnv['fs'] {
  const set = new Set(files);
  const dirs = new Map<string, Set<string>>();
  for (const f of files) {
    const parts = f.split('/');
    for (let i = 1; i < parts.length; i++) {
      const d = parts.slice(0, i).join('/') || '/';
      if (!dirs.has(d)) dirs.set(d, new Set());
      dirs.get(d)!.add(parts[i]!);
    }
  }
  return { exists: (p) => set.has(p) || dirs.has(p), list: (d) => [...(dirs.get(d) ?? [])] };
}

const H200_LIKE = [
  '/usr/local/cuda-13.0/lib64/libcudart.so.13',
  '/usr/local/cuda/include/cuda_fp16.h',
  '/usr/local/cuda/include/cuda_bf16.h',
  '/usr/local/cuda/include/cccl/nv/target',
  '/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13',
  '/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc-builtins.so.13.0',
  '/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13',
  '/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/include/cuda_fp16.h',
  '/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/include/cuda_bf16.h',
  '/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublasLt.so.12',
  '/usr/lib/python3/dist-packages/x.py',
];

describe('library discovery', () => {
  it('finds site-packages under /opt/*/.venv, $VIRTUAL_ENV and the system pythons', () => {
    const de: DiscoveryEnv = { env: { VIRTUAL_ENV: '/v' }, fs: fakeFs([...H200_LIKE, '/v/lib/python3.11/site-packages/a']), home: '/root' };
    expect(sitePackagesDirs(de)).toEqual(['/v/lib/python3.11/site-packages', '/opt/torch/.venv/lib/python3.12/site-packages', '/usr/lib/python3/dist-packages']);
  });

  it('orders candidates: bare sonames, CUDA_HOME, /usr/local/cuda*, then python wheels (cu13 first); preloads nvrtc-builtins', () => {
    const de: DiscoveryEnv = { env: { CUDA_HOME: '/usr/local/cuda-13.0' }, fs: fakeFs(H200_LIKE), home: '/root' };
    const c = libraryCandidates('nvrtc', de);
    expect(c.candidates).toEqual(['libnvrtc.so.13', 'libnvrtc.so.12', 'libnvrtc.so', '/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13']);
    expect(c.preload).toEqual(['/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc-builtins.so.13.0']);
    expect(c.searchedDirs.slice(0, 3)).toEqual(['/usr/local/cuda-13.0/lib64', '/usr/local/cuda-13.0/lib', '/usr/local/cuda-13.0/targets/x86_64-linux/lib']);
    const lt = libraryCandidates('cublasLt', de);
    expect(lt.candidates.slice(3)).toEqual([
      '/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcublasLt.so.13',
      '/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublasLt.so.12',
    ]);
  });

  it('FASTKERNELS_CUDA_LIB_DIRS pins the search to those directories', () => {
    const de: DiscoveryEnv = { env: { FASTKERNELS_CUDA_LIB_DIRS: '/a:/b' }, fs: fakeFs(['/b/libcuda.so.1', '/usr/local/cuda/lib64/libcuda.so.1']), home: '/root' };
    const c = libraryCandidates('cuda', de);
    expect(c.candidates).toEqual(['/b/libcuda.so.1']);
    expect(c.searchedDirs).toEqual(['/a']);
  });

  it('never offers the driver stub', () => {
    const de: DiscoveryEnv = { env: { CUDA_HOME: '/usr/local/cuda/lib64/stubs/..' }, fs: fakeFs(['/usr/local/cuda/lib64/stubs/libcuda.so.1']), home: '/root' };
    expect(libraryCandidates('cuda', de).candidates.every((c) => !c.includes('stubs'))).toBe(true);
  });

  it('finds the CUDA headers for NVRTC (toolkit first, then wheels) with the CCCL folder', () => {
    const de: DiscoveryEnv = { env: {}, fs: fakeFs(H200_LIKE), home: '/root' };
    expect(cudaIncludeDirs(de).found).toEqual(['/usr/local/cuda/include', '/usr/local/cuda/include/cccl']);
    const wheelsOnly: DiscoveryEnv = { env: {}, fs: fakeFs(H200_LIKE.filter((f) => !f.startsWith('/usr/local/cuda/'))), home: '/root' };
    expect(cudaIncludeDirs(wheelsOnly).found).toEqual(['/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/include']);
  });

  it('formats a not-found message listing every place tried', () => {
    const m = formatNotFound('cuda', [{ path: 'libcuda.so.1', error: 'libcuda.so.1: cannot open shared object file: No such file or directory' }], ['/usr/local/cuda/lib64']);
    expect(m).toBe(
      'libcuda.so.1 not found (tried: libcuda.so.1 (cannot open shared object file: No such file or directory); no libcuda.so.1/libcuda.so in: /usr/local/cuda/lib64). Set FASTKERNELS_CUDA_LIB_DIRS=<dir>[:<dir>...] to point at it.',
    );
  });
});

describe('cuDNN discovery', () => {
  const SP = '/opt/torch/.venv/lib/python3.12/site-packages/nvidia';
  const WHEEL = [
    `${SP}/cudnn/lib/libcudnn.so.9`,
    `${SP}/cudnn/lib/libcudnn_ops.so.9`,
    `${SP}/cudnn/lib/libcudnn_cnn.so.9`,
    `${SP}/cudnn/lib/libcudnn_graph.so.9`,
    `${SP}/cudnn/lib/libcudnn_engines_precompiled.so.9`,
    `${SP}/cudnn/lib/libcudnn_heuristic.so.9`,
    `${SP}/cudnn/lib/libcudnn_adv.so.9.10.2`,
    `${SP}/cu13/lib/libcublasLt.so.13`,
  ];

  it('bare soname first (no preloads), then the places of the other libraries: CUDA_HOME, system, nvidia/cudnn/lib', () => {
    const de: DiscoveryEnv = { env: { CUDA_HOME: '/usr/local/cuda-13.0' }, fs: fakeFs([...WHEEL, '/usr/lib/x86_64-linux-gnu/libcudnn.so.9']), home: '/root' };
    const c = cudnnCandidates(de);
    expect(c.candidates).toEqual(['libcudnn.so.9', '/usr/lib/x86_64-linux-gnu/libcudnn.so.9', `${SP}/cudnn/lib/libcudnn.so.9`]);
    expect(c.preloads[0]).toEqual([]);
    // the wheel's sub-libraries, graph first (the others need it), only exact .so.9 sonames
    expect(c.preloads[2]).toEqual([
      `${SP}/cudnn/lib/libcudnn_graph.so.9`,
      `${SP}/cudnn/lib/libcudnn_cnn.so.9`,
      `${SP}/cudnn/lib/libcudnn_engines_precompiled.so.9`,
      `${SP}/cudnn/lib/libcudnn_heuristic.so.9`,
      `${SP}/cudnn/lib/libcudnn_ops.so.9`,
    ]);
    expect(c.searchedDirs.slice(0, 2)).toEqual(['/usr/local/cuda-13.0/lib64', '/usr/local/cuda-13.0/lib']);
    expect(c.searchedDirs).toContain(`${SP}/cu13/lib`);
  });

  it('FASTKERNELS_CUDA_LIB_DIRS pins the search (no bare soname)', () => {
    const de: DiscoveryEnv = { env: { FASTKERNELS_CUDA_LIB_DIRS: `/a:${SP}/cudnn/lib` }, fs: fakeFs(WHEEL), home: '/root' };
    const c = cudnnCandidates(de);
    expect(c.candidates).toEqual([`${SP}/cudnn/lib/libcudnn.so.9`]);
    expect(c.preloads[0]![0]).toBe(`${SP}/cudnn/lib/libcudnn_graph.so.9`);
    expect(c.searchedDirs).toEqual(['/a']);
  });

  it('says "cuDNN not found: tried ..." with each reason, the folders without it, and that convs fall back', () => {
    const m = formatCudnnNotFound([{ path: 'libcudnn.so.9', error: 'libcudnn.so.9: cannot open shared object file: No such file or directory' }], ['/usr/local/cuda/lib64']);
    expect(m).toBe(
      'cuDNN not found: tried libcudnn.so.9 (cannot open shared object file: No such file or directory); no libcudnn.so.9 in: /usr/local/cuda/lib64. ' +
        'The conv ops use their own implicit-GEMM kernel instead; set FASTKERNELS_CUDA_LIB_DIRS=<dir> to point at cuDNN.',
    );
  });
});
