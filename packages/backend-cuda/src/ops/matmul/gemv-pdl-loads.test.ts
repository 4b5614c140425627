/**
 * gemv.cu's PDL builds read x (and the fused norm's residual) with coherent loads after their wait: nvcc compiles the
 * kernels to PTX with FK_PDL=1 and every ld.global.nc after the first griddepcontrol.wait must be a weight stream load
 * (.L1::no_allocate: fk_ld_stream). Under PDL the kernel writing x may still run when the GEMV starts, and the read-only
 * path is only for data no one writes during the reader's lifetime; a tiny GLA model read a wrong x in its first
 * bucket-1 graph replay on an H100 that way. The plain builds keep x on the read-only path (__ldg), as measured.
 * Skipped, saying so, without nvcc.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nvcc } from '../../../test/nvcc-compile.js';

const KERNELS = join(import.meta.dirname, '../../../kernels');

/** Builds with no bias and no norm weight in global memory: the weights are then the only read-only data. */
const BUILDS: Record<string, Record<string, string | number>> = {
  'fk_gemv f32, M 1 (the tiny GLA model)': { FK_T: 'float', FK_VEC: 4, FK_M: 1, FK_UNR: 8, FK_WARPS: 8, FK_BIAS: 0 },
  'fk_gemv bf16, M 4': { FK_T: '__nv_bfloat16', FK_VEC: 8, FK_M: 4, FK_UNR: 8, FK_WARPS: 8, FK_BIAS: 0 },
  'fk_gemv_stream bf16, M 1, gate_up fused': { FK_T: '__nv_bfloat16', FK_VEC: 8, FK_M: 1, FK_UNR: 4, FK_WARPS: 8, FK_BIAS: 0, FK_GLU: 1, FK_LATE_TRIGGER: 1 },
  'fk_gemv_stream bf16, M 1, residual + RMSNorm fused, weight prefetched': { FK_T: '__nv_bfloat16', FK_VEC: 8, FK_M: 1, FK_UNR: 4, FK_WARPS: 8, FK_BIAS: 0, FK_NORM: 2, FK_NORM_PF: 1, FK_MINB: 6 },
};

/** The lines of kernel `entry` in a PTX file. */
function entryLines(ptx: string, entry: string): string[] {
  const at = ptx.indexOf(`.entry ${entry}(`);
  if (at < 0) throw new Error(`no .entry ${entry} in the PTX`);
  const end = ptx.indexOf('\n}', at);
  return ptx.slice(at, end).split('\n');
}

describe(`gemv.cu: loads of x after the PDL wait${nvcc ? '' : ' (SKIPPED: nvcc not on PATH)'}`, () => {
  const dir = nvcc ? mkdtempSync(join(tmpdir(), 'fk-gemv-ptx-')) : '';
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const ptxOf = (defines: Record<string, string | number>, pdl: boolean, i: number): string => {
    const out = join(dir, `g${i}${pdl ? 'p' : ''}.ptx`);
    const args = ['-ptx', '-std=c++17', '-arch=sm_90a', `-I${KERNELS}`, ...Object.entries(defines).map(([k, v]) => `-D${k}=${v}`), ...(pdl ? ['-DFK_PDL=1'] : []), join(KERNELS, 'gemv.cu'), '-o', out];
    const r = spawnSync('nvcc', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`nvcc failed: ${r.stderr || r.error}`);
    return readFileSync(out, 'utf8');
  };
  Object.entries(BUILDS).forEach(([name, defines], i) => {
    const entry = name.split(' ')[0]!;
    it.skipIf(!nvcc)(name, () => {
      const lines = entryLines(ptxOf(defines, true, i), entry);
      const wait = lines.findIndex((l) => l.includes('griddepcontrol.wait'));
      expect(wait, 'a griddepcontrol.wait in the PDL build').toBeGreaterThan(0);
      const after = lines.slice(wait);
      const readOnly = after.filter((l) => /ld\.global\.nc/.test(l) && !/L1::no_allocate/.test(l));
      expect(readOnly, 'read-only-path loads after the wait (only the weight stream may use it)').toEqual([]);
      expect(after.some((l) => /ld\.global\.v4\.u32/.test(l)), 'x read with a coherent 16-byte load after the wait').toBe(true);
      if (!defines.FK_NORM) {
        // the plain build: x stays on the read-only path (the machine code the kernel was measured with)
        const plain = entryLines(ptxOf(defines, false, i), entry);
        expect(plain.some((l) => /ld\.global\.nc\.v4\.u32/.test(l) && !/L1::no_allocate/.test(l)), 'x via __ldg in the plain build').toBe(true);
        expect(plain.some((l) => l.includes('griddepcontrol'))).toBe(false);
      }
    }, 60_000);
  });
});
