/**
 * The addon's tensorMapEncodeTiled (native/addon.cc) on this CPU machine, against a fake libcuda (native/test/
 * fake_cuda_tma.cc plus a stub of every other entry the addon resolves, built here with g++) whose
 * cuTensorMapEncodeTiled records its arguments in the map: the FA3 route's q / k / v maps reach the driver exactly as
 * the lab encodes them, a driver without the entry (before CUDA 12.0) and bad arguments give clear errors, and the enum
 * values TypeScript passes equal cuda.h's (native/test/tma_decls_check.cc, where cuda.h is installed). Each scenario
 * runs in a child process (the addon keeps one libcuda per process). On a GPU: attention-fa3.gpu.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtAddon as addon, fakeLibrarySkip } from '../test/native-fake.js';
import { fa3TensorMapSpec } from './ops/attention/prefill-fa3.js';
import { TENSOR_MAP_DTYPE, TENSOR_MAP_INTERLEAVE_NONE, TENSOR_MAP_L2_PROMOTION, TENSOR_MAP_OOB_FILL, TENSOR_MAP_SWIZZLE, type TensorMapSpec } from './tensor-map.js';

const here = dirname(fileURLToPath(import.meta.url));
const NATIVE = join(here, '..', 'native');
const skip = fakeLibrarySkip('libcuda');
const cudaInclude = ['/usr/local/cuda/include', process.env.CUDA_HOME ? join(process.env.CUDA_HOME, 'include') : ''].find((d) => d && existsSync(join(d, 'cuda.h')));

/** The driver entries the addon requires (FK_DRIVER_FUNCS in addon.cc): the fake library must export each. */
function driverEntries(): string[] {
  const src = readFileSync(join(NATIVE, 'addon.cc'), 'utf8');
  const block = /#define FK_DRIVER_FUNCS\(X\)([\s\S]*?)\n\n/.exec(src)?.[1] ?? '';
  return [...block.matchAll(/X\((cu\w+),/g)].map((m) => m[1]!);
}

let dir = '';
const libs = { tma: '', noTma: '' };

beforeAll(() => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'fk-fake-cuda-'));
  const stubs = join(dir, 'stubs.cc');
  const names = driverEntries();
  expect(names).toContain('cuLaunchKernel');
  writeFileSync(stubs, names.map((n) => `extern "C" int ${n}() { return 999; }\n`).join(''));
  for (const [k, def] of [['tma', ''], ['noTma', '-DFAKE_NO_TMA']] as const) {
    libs[k] = join(dir, `libcuda_${k}.so`);
    execFileSync('g++', ['-std=c++17', '-O1', '-shared', '-fPIC', ...(def ? [def] : []), '-o', libs[k], stubs, join(NATIVE, 'test', 'fake_cuda_tma.cc')], { stdio: 'pipe' });
  }
}, 120_000);
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// The child: load the addon and the fake libcuda, encode each spec, print the 16 words of each map (or the error).
const DRIVER = `
import { createRequire } from 'node:module';
const a = createRequire(import.meta.url)(process.env.FK_ADDON);
const load = a.loadLibrary('cuda', [process.env.FK_LIB]);
const out = [];
for (const args of JSON.parse(process.env.FK_CALLS)) {
  try {
    const buf = a.tensorMapEncodeTiled(...args);
    const w = new BigUint64Array(buf);
    out.push({ bytes: buf.byteLength, words: Array.from(w, (x) => x.toString()) });
  } catch (e) {
    out.push({ error: String(e && e.message) });
  }
}
console.log(JSON.stringify({ ok: load.ok, out }));
`;

type Outcome = { bytes?: number; words?: string[]; error?: string };
function drive(lib: keyof typeof libs, calls: unknown[][]): { ok: boolean; out: Outcome[] } {
  const env = { ...process.env, FK_ADDON: addon!, FK_LIB: libs[lib], FK_CALLS: JSON.stringify(calls) };
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', DRIVER], { env, encoding: 'utf8' })) as { ok: boolean; out: Outcome[] };
}
const argsOf = (s: TensorMapSpec) => [s.dataType, s.address, s.dims, s.stridesBytes, s.box, s.elementStrides, s.interleave, s.swizzle, s.l2Promotion, s.oobFill];

/** The fake driver's record of a call (fake_cuda_tma.cc), decoded. */
function record(words: string[]) {
  const w = words.map(BigInt);
  const rank = Number(w[2]);
  const field = (x: bigint, bits: number, i: number) => Number((x >> BigInt(bits * i)) & ((1n << BigInt(bits)) - 1n));
  return {
    magic: w[0] === 0x544d41505f464bn,
    dataType: Number(w[1]),
    address: Number(w[3]),
    dims: w.slice(4, 4 + rank).map(Number),
    stridesBytes: w.slice(9, 9 + rank - 1).map(Number),
    box: Array.from({ length: rank }, (_, i) => field(w[13]!, 12, i)),
    elementStrides: Array.from({ length: rank }, (_, i) => field(w[14]!, 4, i)),
    interleave: field(w[15]!, 8, 0),
    swizzle: field(w[15]!, 8, 1),
    l2Promotion: field(w[15]!, 8, 2),
    oobFill: field(w[15]!, 8, 3),
  };
}

describe.skipIf(!!skip)('tensorMapEncodeTiled in the addon, against a fake libcuda', () => {
  it("the FA3 route's q / k / v maps reach cuTensorMapEncodeTiled as the lab encodes them; 128 bytes come back", () => {
    const q = { address: 0x7f0000000000, rows: 4096, heads: 32, rowStrideBytes: 32 * 256, headStrideBytes: 256 };
    const k = { address: 0x7f0000400000, rows: 300, heads: 8, rowStrideBytes: 48 * 128, headStrideBytes: 128 }; // a fused-qkv slice, D 64
    const specs = [fa3TensorMapSpec('bf16', 128, q, 64), fa3TensorMapSpec('f16', 64, k, 128)];
    const r = drive('tma', specs.map(argsOf));
    expect(r.ok).toBe(true);
    r.out.forEach((o, i) => {
      expect(o.error).toBeUndefined();
      expect(o.bytes).toBe(128);
      const { magic, ...got } = record(o.words!);
      expect(magic).toBe(true);
      const { address: _a, ...want } = specs[i]!;
      expect({ ...got, address: undefined }).toEqual({ ...want, address: undefined });
      expect(got.address).toBe(specs[i]!.address);
    });
  });

  it("a driver error, bad arguments and a driver without the entry are reported clearly", () => {
    const s = fa3TensorMapSpec('bf16', 128, { address: 0x10000, rows: 10, heads: 2, rowStrideBytes: 512, headStrideBytes: 256 }, 64);
    const a = argsOf(s);
    const r = drive('tma', [
      argsOf({ ...s, address: 0x10008 }), // the fake driver rejects it as the real one does
      [a[0], a[1], [], [], [], [], 0, 3, 3, 0],
      [a[0], a[1], [128, 2, 10], [256], a[4], a[5], 0, 3, 3, 0],
      [a[0], a[1], [128, 2, -1], a[3], a[4], a[5], 0, 3, 3, 0],
      a.slice(0, 9),
    ]);
    expect(r.out.map((o) => o.error)).toEqual([
      expect.stringMatching(/cuTensorMapEncodeTiled failed: CUDA_ERROR_1 \(1\)/),
      expect.stringMatching(/rank 0 \(1 to 5 dims\)/),
      expect.stringMatching(/stridesBytes must be rank - 1/),
      expect.stringMatching(/dims must be non-negative integers/),
      expect.stringMatching(/^tensorMapEncodeTiled\(dataType, address/),
    ]);
    const old = drive('noTma', [a]);
    expect(old.ok).toBe(true); // the entry is optional: the addon loads, and says what is missing when asked
    expect(old.out[0]!.error).toMatch(/has no cuTensorMapEncodeTiled: TMA needs a CUDA 12.0\+ driver/);
  });

  it.skipIf(!cudaInclude)("the enum values src/tensor-map.ts passes equal cuda.h's; cuda.h's CUtensorMap and entry as cuda_decls.h mirrors them", () => {
    const defs = {
      FK_DTYPE_BF16: TENSOR_MAP_DTYPE.bf16, FK_DTYPE_F16: TENSOR_MAP_DTYPE.f16, FK_DTYPE_F32: TENSOR_MAP_DTYPE.f32,
      FK_SWIZZLE_128B: TENSOR_MAP_SWIZZLE['128B'], FK_SWIZZLE_NONE: TENSOR_MAP_SWIZZLE.none,
      FK_L2_256B: TENSOR_MAP_L2_PROMOTION['256B'], FK_L2_NONE: TENSOR_MAP_L2_PROMOTION.none,
      FK_OOB_ZEROS: TENSOR_MAP_OOB_FILL.zeros, FK_INTERLEAVE_NONE: TENSOR_MAP_INTERLEAVE_NONE,
    };
    const flags = Object.entries(defs).map(([k, v]) => `-D${k}=${v}`);
    execFileSync('g++', ['-std=c++17', '-fsyntax-only', `-I${cudaInclude}`, ...flags, join(NATIVE, 'test', 'tma_decls_check.cc')], { stdio: 'pipe' });
  });
});

describe.skipIf(!skip)('tensorMapEncodeTiled in the addon', () => {
  it(`skipped: ${skip}`, () => {});
});
