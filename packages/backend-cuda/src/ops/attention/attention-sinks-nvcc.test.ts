/**
 * Attention sinks (FK_SINKS) in the paged decode and varlen prefill kernels (the FA3 prefill kernel too,
 * attention_fa3.cu), checked through nvcc (skipped, saying so,
 * where nvcc is absent):
 * - the builds without sinks are the PTX they were before sinks came, byte for byte (comment lines aside), for the
 *   defines the launchers pass (each path, PDL on and off): the hash of each build's PTX is the one recorded from the
 *   sources before the change (PTX_BEFORE_SINKS, nvcc 13.0.88; with another nvcc the hashes cannot be compared and the
 *   check says so); the FK_SINKS=1 build of each is checked to differ (else the check could pass with sinks compiled in);
 * - the FK_SINKS=1 builds compile for sm_90a with no register spills (ptxas -v).
 */
import { createHash } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';

function nvccVersion(): string | null {
  try {
    const v = execFileSync('nvcc', ['--version'], { encoding: 'utf8', stdio: 'pipe' });
    return /V(\d+\.\d+\.\d+)/.exec(v)?.[1] ?? 'unknown';
  } catch {
    return null;
  }
}
const version = nvccVersion();
const nvcc = version !== null;
/** The nvcc the hashes below were recorded with. */
const RECORDED_WITH = '13.0.88';

const BF = '__nv_bfloat16';
/** [label, file, defines]: the launchers' defines (attention.ts), a few of each path and PDL on and off. */
const VARIANTS: readonly (readonly [string, string, readonly string[]])[] = [
  ['decode simple bf16 D128', 'attention_decode.cu', [`-DFK_T=${BF}`, '-DFK_D=128', '-DFK_VB=16', '-DFK_HG=4', '-DFK_UNROLL=4', '-DFK_BS=16', '-DFK_WARPS=4', '-DFK_DEC_PATH=1']],
  ['decode simple f32 D80 PDL', 'attention_decode.cu', ['-DFK_T=float', '-DFK_D=80', '-DFK_VB=16', '-DFK_HG=2', '-DFK_UNROLL=2', '-DFK_BS=32', '-DFK_WARPS=4', '-DFK_DEC_PATH=1', '-DFK_PDL=1']],
  ['decode mma bf16 D128', 'attention_decode.cu', [`-DFK_T=${BF}`, '-DFK_D=128', '-DFK_MHG=8', '-DFK_MWARPS=4', '-DFK_STAGES=2', '-DFK_BS=16', '-DFK_DEC_PATH=2']],
  ['decode mma f16 D64 early KV PDL', 'attention_decode.cu', ['-DFK_T=__half', '-DFK_D=64', '-DFK_MHG=4', '-DFK_MWARPS=4', '-DFK_STAGES=3', '-DFK_BS=16', '-DFK_DEC_PATH=2', '-DFK_EARLY_KV=1', '-DFK_PDL=1']],
  ['decode combine bf16', 'attention_decode.cu', [`-DFK_T=${BF}`, '-DFK_COMBINE_UNROLL=8', '-DFK_PDL=1']],
  ['prefill bf16 D128 (mma, wgmma)', 'attention_prefill.cu', [`-DFK_T=${BF}`, '-DFK_D=128', '-DFK_WARPS=8', '-DFK_SKIP_RESCALE=1', '-DFK_PDL=1']],
  ['prefill f16 D64 (mma)', 'attention_prefill.cu', ['-DFK_T=__half', '-DFK_D=64', '-DFK_WARPS=4', '-DFK_SKIP_RESCALE=0']],
  ['prefill simple f32 D96', 'attention_prefill.cu', ['-DFK_T=float', '-DFK_D=96', '-DFK_WARPS=4']],
  ['prefill fa3 bf16 D128', 'attention_fa3.cu', [`-DFK_T=${BF}`, '-DFK_D=128']],
  ['prefill fa3 f16 D64', 'attention_fa3.cu', ['-DFK_T=__half', '-DFK_D=64']],
];

/**
 * sha256 of each variant's PTX from the sources before sinks (comment lines dropped), nvcc RECORDED_WITH. The FA3
 * kernel's from attention_fa3.cu with its output row / head stride parameters (dense SDPA's in-place [H, L, D] output;
 * recorded again then: the build without sinks checked as before, a different PTX from 00da0f8's by those parameters).
 */
const PTX_BEFORE_SINKS: Readonly<Record<string, string>> = {
  'decode simple bf16 D128': 'af6dbeb5cdf2898c27ee6e3fe880eff05660ef5240dc6daf93d84a500ef81097',
  'decode simple f32 D80 PDL': 'a9ef9fc643879895377dd3875125e145ed8f3b3bd1a381156ea3236fdbb02362',
  'decode mma bf16 D128': 'd899792d141e7c72a3f04a832d896c4548539cf7a13986c02d80228a4877a3aa',
  'decode mma f16 D64 early KV PDL': '32a21e1d94f8c4886b87951bebfdb03a407e6a6f5fb1388ebe952080151b4db9',
  'decode combine bf16': '9960b9a643a892b49c2f6a43f4c3559790ef592440856d55c1f6c42c9302cf96',
  'prefill bf16 D128 (mma, wgmma)': '10b2f852046ede56954ba536dc9b9b1e400a05018fde3a06d081e80bdf5f8c7f',
  'prefill f16 D64 (mma)': '71a8d71b27b4b8f75f9599091048d2355a2fa4b68d791f8bdd1834e880ac85f2',
  'prefill simple f32 D96': '91166deab99aedb670668ecf2a9150051d23ec54f99e39994f8a243a7b8e6bcd',
  'prefill fa3 bf16 D128': 'e9967663eec38630bbee99d9a2035d55d25260071fd73daee4e56f4a3e300657',
  'prefill fa3 f16 D64': '1f170b95b4d5d2cb579bf30455fb258a0bf0ea6296415b11b2cac3e532368874',
};

/** The PTX without its comment lines (nvcc's version and build id). */
function normalizePtx(ptx: string): string {
  return ptx
    .split('\n')
    .filter((l) => !/^\s*\/\//.test(l))
    .join('\n');
}

const dir = nvcc ? mkdtempSync(join(tmpdir(), 'fk-sinks-nvcc-')) : '';
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function build(file: string, defines: readonly string[], tag: string, mode: 'ptx' | 'cubin'): { ok: boolean; log: string; out: string } {
  const src = join(dir, `${tag}.cu`);
  writeFileSync(src, KERNEL_SOURCES[file]!);
  const out = join(dir, `${tag}.${mode}`);
  const args =
    mode === 'ptx'
      ? ['-std=c++17', '-arch=compute_90a', '-ptx', ...defines, src, '-o', out]
      : ['-std=c++17', '-gencode=arch=compute_90a,code=sm_90a', '-cubin', '-Xptxas', '-v', ...defines, src, '-o', out];
  const r = spawnSync('nvcc', args, { encoding: 'utf8' });
  return { ok: r.status === 0, log: `${r.stdout}${r.stderr}`, out };
}

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe(`attention kernels without sinks: the PTX from before sinks${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  VARIANTS.forEach(([label, file, defines], i) => {
    it.skipIf(!nvcc)(label, { timeout: 240_000 }, () => {
      const r = build(file, defines, `ptx${i}`, 'ptx');
      expect(r.ok, r.log).toBe(true);
      const ptx = readFileSync(r.out, 'utf8');
      const h = sha(normalizePtx(ptx));
      console.log(`${label}: ${h}`);
      if (version !== RECORDED_WITH) {
        console.log(`nvcc ${version}: the hashes were recorded with ${RECORDED_WITH}, not compared`);
        return;
      }
      expect(h, `${label}: the build without sinks changed (or record the hashes again, from the sources before sinks)`).toBe(PTX_BEFORE_SINKS[label]);
      // the FK_SINKS=1 build is another build (the check above would pass blindly if the define did nothing)
      const s = build(file, [...defines, '-DFK_SINKS=1'], `ptxs${i}`, 'ptx');
      expect(s.ok, s.log).toBe(true);
      expect(sha(normalizePtx(readFileSync(s.out, 'utf8')))).not.toBe(h);
    });
  });
});

describe(`attention kernels with sinks (FK_SINKS=1): sm_90a, no spills${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  VARIANTS.forEach(([label, file, defines], i) => {
    it.skipIf(!nvcc)(label, { timeout: 240_000 }, () => {
      const r = build(file, [...defines, '-DFK_SINKS=1'], `cubin${i}`, 'cubin');
      expect(r.ok, r.log).toBe(true);
      expect(r.log, 'the ptxas -v report').toMatch(/Used \d+ registers/);
      for (const m of r.log.matchAll(/Compiling entry function '(\w+)'[\s\S]*?Used (\d+) registers/g)) console.log(`${label} ${m[1]}: ${m[2]} registers`);
      expect(r.log).not.toMatch(/[1-9]\d* bytes spill/);
      expect(r.log).not.toMatch(/[1-9]\d* bytes stack frame/);
    });
  });
});
