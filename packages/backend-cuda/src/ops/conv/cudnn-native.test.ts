/**
 * The addon's cuDNN code (native/cudnn.cc, cudnn_graph.cc, cudnn_legacy.cc) on this CPU machine, against a fake
 * libcudnn (native/test/fake_cudnn.cc, built here with g++) that checks each backend descriptor at finalize (attribute
 * types and counts, the conv's output shape against its input, filter and geometry) and logs every call. Parameter
 * blocks come from the TypeScript side (fillCudnnParams), so the protocol is tested end to end; each scenario runs in
 * a child process (the addon keeps cuDNN loaded per process). Numbers on a GPU: cuda-conv.gpu.test.ts.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cudnnCandidates } from '../../discovery.js';
import { hasGxx as gxx } from '../../../test/host-cuda.js';
import { builtAddon as addon, fakeLibrarySkip } from '../../../test/native-fake.js';
import { CUDNN_PARAM_COUNT, fillCudnnParams, setCudnnPointers, type CudnnApi } from './cudnn-params.js';
import type { CudnnPlanInfo } from './cudnn-library.js';
import type { ConvDType } from './implicit-gemm-source.js';
import { ConvGeometry, fillGeometry, type ConvFormat, type Nd } from './plan.js';

const here = dirname(fileURLToPath(import.meta.url));
const FAKE_SRC = join(here, '../../../native/test/fake_cudnn.cc');
const CHECK_SRC = join(here, '../../../native/test/cudnn_decls_check.cc');
const skip = fakeLibrarySkip('libcudnn');

// backend descriptor types and attributes the checks read (native/cudnn_decls.h)
const TENSOR = 17, CONVOLUTION = 1, OP_FORWARD = 10, OP_BWD_DATA = 12, OPERATIONGRAPH = 15, ENGINEHEUR = 4, VARIANT_PACK = 16;
const ATTR = { dims: 902, strides: 903, uid: 906, align: 900, virtual: 907, dataType: 901, heurMode: 200, packPtrs: 1001, packUids: 1000, packWs: 1003 };
const MB = 1 << 20;

interface Entry {
  op: string;
  d?: number;
  kind?: number;
  attr?: number;
  type?: number;
  v?: (number | boolean)[];
  status?: number;
  engine?: number;
  pack?: number;
}
interface StepResult {
  r: number;
  reason: string;
  plan: CudnnPlanInfo | null;
  plans: number;
}
interface Step {
  params?: number[];
  /** On a workspace answer, call again with that much workspace (at 1 << 28). */
  grow?: boolean;
  clear?: boolean;
}

let dir = '';
const libs = { full: '', noGraph: '', noLegacy: '' };

beforeAll(() => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'fk-fake-cudnn-'));
  for (const [k, def] of [['full', ''], ['noGraph', '-DFAKE_NO_GRAPH'], ['noLegacy', '-DFAKE_NO_LEGACY']] as const) {
    libs[k] = join(dir, `libcudnn_${k}.so`);
    execFileSync('g++', ['-std=c++17', '-O1', '-shared', '-fPIC', ...(def ? [def] : []), '-o', libs[k], FAKE_SRC], { stdio: 'pipe' });
  }
}, 120_000);
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// The child: load the addon and the fake cuDNN, run the steps, print what each returned.
const DRIVER = `
import { createRequire } from 'node:module';
const a = createRequire(import.meta.url)(process.env.FK_ADDON);
const cfg = JSON.parse(process.env.FK_STEPS);
const load = a.cudnnLoad([process.env.FK_LIB], [[]]);
const out = [];
for (const s of cfg) {
  if (s.clear) { a.cudnnClearPlans(); continue; }
  const p = Float64Array.from(s.params);
  let r = a.cudnnConv(p);
  if (r > 0 && s.grow) { p[47] = 1 << 28; p[48] = r; r = a.cudnnConv(p); }
  out.push({ r, reason: a.cudnnDeclineReason(), plan: a.cudnnLastPlan(), plans: a.cudnnPlanCount() });
}
console.log(JSON.stringify({ load, out }));
`;

function drive(steps: Step[], opts: { engines?: string; fail?: string; lib?: keyof typeof libs; strictCounts?: boolean } = {}) {
  const log = join(dir, `log-${Math.random().toString(36).slice(2)}.jsonl`);
  const env = {
    ...process.env,
    FK_ADDON: addon!,
    FK_LIB: libs[opts.lib ?? 'full'],
    FK_STEPS: JSON.stringify(steps),
    FAKE_CUDNN_LOG: log,
    FAKE_CUDNN_ENGINES: opts.engines ?? '1//0/',
    ...(opts.fail ? { FAKE_CUDNN_FAIL: opts.fail } : {}),
    ...(opts.strictCounts ? { FAKE_CUDNN_STRICT_COUNTS: '1' } : {}),
  };
  const stdout = execFileSync(process.execPath, ['--input-type=module', '-e', DRIVER], { env, encoding: 'utf8' });
  const res = JSON.parse(stdout) as { load: { ok: boolean; apis?: string[] }; out: StepResult[] };
  const entries = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as Entry) : [];
  return { ...res, log: entries };
}

const packed = (shape: number[], order: number[]) => {
  const s = new Array<number>(shape.length);
  let z = 1;
  for (const d of order) {
    s[d] = z;
    z *= shape[d]!;
  }
  return s;
};
const contig = (shape: number[]) => packed(shape, shape.map((_, i) => shape.length - 1 - i));
const cl = (shape: number[]) => packed(shape, [1, ...Array.from({ length: shape.length - 2 }, (_, i) => shape.length - 1 - i), 0]);

interface ConvCase {
  nd?: Nd;
  transposed?: boolean;
  x: number[];
  w: number[];
  y: number[];
  attrs?: Partial<{ stride: number; padding: number; dilation: number; groups: number }>;
  dtype?: ConvDType;
  format?: ConvFormat;
  tensorOps?: boolean;
  search?: boolean;
  api?: CudnnApi;
  ptrs?: [number, number, number];
  xStrides?: number[];
}

/** A parameter block as conv-kernels.ts writes it: x at 4096, w at 8192, y at 12288 (16-byte aligned), stream 77. */
function params(c: ConvCase): number[] {
  const g = fillGeometry(new ConvGeometry(), c.nd ?? 2, c.transposed ?? false, c.x, c.w, c.y, { stride: 1, padding: 0, dilation: 1, groups: 1, ...c.attrs });
  const format = c.format ?? 'channels_last';
  const st = format === 'channels_last' ? cl : contig;
  const p = fillCudnnParams(new Float64Array(CUDNN_PARAM_COUNT), g, format, c.dtype ?? 'f16', c.tensorOps ?? true, 0, { shape: c.x, strides: c.xStrides ?? st(c.x) }, { shape: c.y, strides: st(c.y) }, c.search ?? false, c.api ?? 'auto');
  const [x, w, y] = c.ptrs ?? [4096, 8192, 12288];
  return [...setCudnnPointers(p, x, w, y, 0, 0, 77)];
}

const RESNET_3X3: ConvCase = { x: [2, 8, 20, 30], w: [16, 8, 3, 3], y: [2, 16, 20, 30], attrs: { padding: 1 } };
const sets = (log: Entry[], kind: number, attr: number) => log.filter((e) => e.op === 'set' && e.kind === kind && e.attr === attr).map((e) => e.v);

describe.skipIf(skip)(`cuDNN in the addon against a fake libcudnn${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('conv2d f16 channels-last: real strides, uids x / w / y, alignment 16, not virtual; a forward node; heuristics instant then fallback list; workspace asked, then run', () => {
    const { load, out, log } = drive([{ params: params(RESNET_3X3), grow: true }], { engines: '5/d/0/,6/t/0/f,7/t/2048/,8//0/' });
    expect(load).toMatchObject({ ok: true, apis: ['graph', 'legacy'] });
    expect(out[0]!.r).toBe(0);
    // x, w (KRSC), y
    expect(sets(log, TENSOR, ATTR.dims)).toEqual([[2, 8, 20, 30], [16, 8, 3, 3], [2, 16, 20, 30]]);
    expect(sets(log, TENSOR, ATTR.strides)).toEqual([[4800, 1, 240, 8], [72, 1, 24, 8], [9600, 1, 480, 16]]);
    expect(sets(log, TENSOR, ATTR.uid)).toEqual([[120], [119], [121]]);
    expect(sets(log, TENSOR, ATTR.align)).toEqual([[16], [16], [16]]);
    expect(sets(log, TENSOR, ATTR.virtual)).toEqual([[false], [false], [false]]);
    expect(sets(log, TENSOR, ATTR.dataType)).toEqual([[2], [2], [2]]);
    // f32 compute, cross-correlation, 2 spatial dims, pads / dilations / strides
    expect(log.filter((e) => e.op === 'set' && e.kind === CONVOLUTION).map((e) => [e.attr, e.v])).toEqual([
      [100, [0]], [101, [1]], [106, [2]], [105, [1, 1]], [104, [1, 1]], [102, [1, 1]], [103, [1, 1]],
    ]);
    expect(log.some((e) => e.op === 'finalize' && e.kind === OP_FORWARD && e.status === 0)).toBe(true);
    expect(log.some((e) => e.op === 'finalize' && e.kind === OPERATIONGRAPH && e.status === 0)).toBe(true);
    expect(sets(log, ENGINEHEUR, ATTR.heurMode)).toEqual([[0], [2]]);
    // engine 5 down-converts its inputs (left out), 6's plan does not finalise: 7, and its workspace asked for first
    const plan = out[0]!.plan!;
    expect(plan).toMatchObject({ api: 'graph', engine: 7, engineName: 'eng7_k2=0_k14=3', workspace: 2048, algo: -1, engineConfigs: 3, declined: false });
    expect(plan.note).toMatch(/1 config\(s\) left out for their numerics \(down-converted inputs\).*eng6.*cudnnBackendFinalize: CUDNN_STATUS_NOT_SUPPORTED/);
    const exec = log.filter((e) => e.op === 'execute');
    expect(exec).toHaveLength(1);
    expect(exec[0]).toMatchObject({ engine: 7, status: 0 });
    expect(sets(log, VARIANT_PACK, ATTR.packPtrs)).toEqual([[4096, 8192, 12288]]);
    expect(sets(log, VARIANT_PACK, ATTR.packUids)).toEqual([[120, 119, 121]]);
    expect(sets(log, VARIANT_PACK, ATTR.packWs)).toEqual([[1 << 28]]);
    expect(log.filter((e) => e.op === 'setStream').map((e) => (e as unknown as { stream: number }).stream)).toEqual([77]);
  });

  it('exact f32 (allowTf32 off) leaves out tensor-core engines; with TF32 allowed they stay first', () => {
    const f32 = { ...RESNET_3X3, dtype: 'f32' as const, format: 'contiguous' as const };
    const { out } = drive([{ params: params({ ...f32, tensorOps: false }) }, { params: params({ ...f32, tensorOps: true }) }], { engines: '3/t/0/,4//0/' });
    expect(out.map((o) => [o.r, o.plan!.engine])).toEqual([[0, 4], [0, 3]]);
    expect(out[0]!.plan!.note).toMatch(/1 config\(s\) left out.*TF32 with allowTf32 off/);
    // a cuDNN that refuses larger note / knob requests than its kinds: asked again with 9.6's counts
    const strict = drive([{ params: params({ ...f32, tensorOps: false }) }], { engines: '3/t/0/,4//0/', strictCounts: true });
    expect(strict.out[0]!.plan).toMatchObject({ engine: 4, engineName: 'eng4_k2=4_k14=3' });
  });

  it('unit dims get the strides a packed tensor has there (as torch fixSizeOneDimStride); conv1d runs as [N, C, 1, L]', () => {
    const x = [2, 8, 1, 1];
    const { out, log } = drive([
      { params: params({ x, w: [4, 8, 1, 1], y: [2, 4, 1, 1], xStrides: [8, 1, 999, 999] }) },
      { params: params({ nd: 1, x: [3, 4, 50], w: [6, 4, 3], y: [3, 6, 48], format: 'contiguous' }) },
    ]);
    expect(out.map((o) => o.r)).toEqual([0, 0]);
    const strides = sets(log, TENSOR, ATTR.strides);
    expect(strides[0]).toEqual([8, 1, 8, 8]);
    expect(sets(log, TENSOR, ATTR.dims).slice(3)).toEqual([[3, 4, 1, 50], [6, 4, 1, 3], [3, 6, 1, 48]]);
    expect(strides.slice(3)).toEqual([[200, 50, 50, 1], [12, 3, 3, 1], [288, 48, 48, 1]]);
  });

  it('conv_transpose2d as a backward-data node: dy is the input, dx the output, the filter [C, K / G, ...]', () => {
    const c: ConvCase = { transposed: true, x: [2, 6, 7, 7], w: [6, 2, 3, 3], y: [2, 4, 15, 15], attrs: { stride: 2, groups: 2 }, format: 'contiguous' };
    const { out, log } = drive([{ params: params(c) }]);
    expect(out[0]!.r).toBe(0);
    const bwd = log.filter((e) => e.op === 'set' && e.kind === OP_BWD_DATA);
    const tensors = log.filter((e) => e.op === 'create' && e.kind === TENSOR).map((e) => e.d);
    const ref = (attr: number) => bwd.find((e) => e.attr === attr)!.v![0];
    expect([ref(711), ref(709), ref(710)]).toEqual(tensors); // dy = x, w, dx = y
    expect(log.some((e) => e.op === 'finalize' && e.kind === OP_BWD_DATA && e.status === 0)).toBe(true); // dy = conv(dx) checked
  });

  it("an operand off 16 bytes is its own plan with that alignment; the variant pack is rebuilt only when a pointer changes", () => {
    const { out, log } = drive([
      { params: params(RESNET_3X3) },
      { params: params(RESNET_3X3) },
      { params: params({ ...RESNET_3X3, ptrs: [4096, 8192, 16384] }) },
      { params: params({ ...RESNET_3X3, ptrs: [4098, 8192, 12288] }) },
    ]);
    expect(out.map((o) => [o.r, o.plans])).toEqual([[0, 1], [0, 1], [0, 1], [0, 2]]);
    expect(sets(log, TENSOR, ATTR.align).slice(3)).toEqual([[2], [16], [16]]);
    expect(log.filter((e) => e.op === 'create' && e.kind === VARIANT_PACK)).toHaveLength(3);
    expect(log.filter((e) => e.op === 'execute')).toHaveLength(4);
  });

  it('an engine refusing at launch gives way to the next config; one over the workspace limit is passed over', () => {
    const { out, log } = drive([{ params: params(RESNET_3X3) }], { engines: `1//${2 ** 40}/,9//0/x,10//0/` });
    expect(out[0]!.r).toBe(0);
    expect(log.filter((e) => e.op === 'execute').map((e) => [e.engine, e.status])).toEqual([[9, 3000], [10, 0]]);
    expect(out[0]!.plan).toMatchObject({ api: 'graph', engine: 10 });
    expect(out[0]!.plan!.note).toMatch(/eng1_k2=1_k14=3: workspace \d+ > limit 268435456.*cudnnBackendExecute \(eng9_k2=2_k14=3\): CUDNN_STATUS_NOT_SUPPORTED/);
  });

  it('no engine finalises: the legacy API runs the key and lastPlan says why; graph-only declines with the reason', () => {
    const { out, log } = drive([{ params: params(RESNET_3X3) }, { params: params({ ...RESNET_3X3, api: 'graph' }) }, { params: params({ ...RESNET_3X3, api: 'legacy' }) }], { engines: '1//0/f,2//0/f' });
    expect(out[0]).toMatchObject({ r: 0, plan: { api: 'legacy', engine: -1, engineName: 'IMPLICIT_PRECOMP_GEMM', algo: 1 } });
    expect(out[0]!.plan!.graphDeclined).toMatch(/^no engine config of 2 finalised within the workspace limit \(execution plan eng1_k2=1_k14=3 cudnnBackendFinalize: CUDNN_STATUS_NOT_SUPPORTED/);
    expect(out[1]).toMatchObject({ r: -1, plan: { api: null, declined: true } });
    expect(out[1]!.reason).toMatch(/^graph API: no engine config of 2 finalised/);
    expect(out[2]).toMatchObject({ r: 0, plan: { api: 'legacy', graphDeclined: '' } });
    expect(log.filter((e) => e.op === 'legacyForward')).toHaveLength(2);
  });

  it('a failing backend call names its descriptor and attribute; the legacy API then runs the key', () => {
    const { out } = drive([{ params: params(RESNET_3X3) }], { fail: 'set:903' });
    expect(out[0]).toMatchObject({ r: 0, plan: { api: 'legacy' } });
    expect(out[0]!.plan!.graphDeclined).toBe('tensor x CUDNN_ATTR_TENSOR_STRIDES: CUDNN_STATUS_BAD_PARAM');
    const fin = drive([{ params: params({ ...RESNET_3X3, api: 'graph' }) }], { fail: `finalize:${OPERATIONGRAPH}` });
    expect(fin.out[0]!.reason).toBe('graph API: operation graph cudnnBackendFinalize: CUDNN_STATUS_BAD_PARAM');
  });

  it("algoSearch 'benchmark' without a loaded CUDA driver: asks for the candidates' workspace, measures nothing, says why, keeps the heuristics' plan", () => {
    const { out, log } = drive([{ params: params({ ...RESNET_3X3, search: true }), grow: true }], { engines: `1//100/,2//5000/,3//${128 * MB}/,4//0/` });
    expect(out[0]!.r).toBe(0);
    // engine 3's 128 MiB is over the 64 MiB a search offers the other candidates
    expect(log.filter((e) => e.op === 'finalize' && e.kind === 5).length).toBe(4);
    expect(out[0]!.plan).toMatchObject({ api: 'graph', engine: 1, searched: true, timedPlans: 0, measuredMs: -1 });
    expect(out[0]!.plan!.note).toBe('the CUDA driver is not loaded');
    expect(sets(log, VARIANT_PACK, ATTR.packWs)).toEqual([[1 << 28]]);
  });

  it('a cuDNN without the backend API runs convs on the legacy API; one without the legacy API on the graph API', () => {
    const a = drive([{ params: params(RESNET_3X3) }], { lib: 'noGraph' });
    expect(a.load.apis).toEqual(['legacy']);
    expect(a.out[0]).toMatchObject({ r: 0, plan: { api: 'legacy', graphDeclined: 'the backend API is missing from this cuDNN' } });
    const b = drive([{ params: params(RESNET_3X3) }, { params: params({ ...RESNET_3X3, api: 'legacy' }) }], { lib: 'noLegacy', engines: '1//0/f' });
    expect(b.load.apis).toEqual(['graph']);
    expect(b.out[0]!.r).toBe(-1);
    expect(b.out[0]!.reason).toMatch(/^graph API: no engine config of 1 finalised.*; legacy API: the legacy convolution API is missing from this cuDNN$/);
    expect(b.out[1]!.reason).toBe('legacy API: the legacy convolution API is missing from this cuDNN');
  });

  it('cudnnClearPlans destroys every descriptor the plans created', () => {
    const { log } = drive([{ params: params(RESNET_3X3), grow: true }, { params: params({ ...RESNET_3X3, search: true }), grow: true }, { clear: true }], { engines: '1//0/,2//64/x,3//0/' });
    const created = new Set(log.filter((e) => e.op === 'create').map((e) => e.d));
    const destroyed = new Set(log.filter((e) => e.op === 'destroy').map((e) => e.d));
    expect(created.size).toBeGreaterThan(20);
    expect([...created].filter((d) => !destroyed.has(d))).toEqual([]);
  });
});

/**
 * Real cuDNN 9 headers: the system's, or the include/ beside a libcudnn the loader would
 * try (PyTorch's nvidia/cudnn/lib -> nvidia/cudnn/include), with cuda_runtime_api.h from CUDA or the wheel beside it.
 */
function cudnnHeaders(): { cudnn: string; cuda: string } | undefined {
  const c = cudnnCandidates();
  const libDirs = [...c.candidates.filter((p) => p.includes('/')).map((p) => dirname(p)), ...c.searchedDirs];
  const cudnnDirs = ['/usr/include', '/usr/include/x86_64-linux-gnu', '/usr/local/cuda/include', ...libDirs.map((d) => join(d, '../include'))];
  const cudnn = cudnnDirs.find((d) => d && existsSync(join(d, 'cudnn_graph.h')) && existsSync(join(d, 'cudnn_cnn.h')));
  if (!cudnn) return undefined;
  const cudaDirs = [process.env.CUDA_HOME && join(process.env.CUDA_HOME, 'include'), '/usr/local/cuda/include', '/usr/include', join(cudnn, '../../cuda_runtime/include')];
  const cuda = cudaDirs.find((d) => d && existsSync(join(d, 'cuda_runtime_api.h')));
  return cuda ? { cudnn, cuda } : undefined;
}
const headers = gxx ? cudnnHeaders() : undefined;
const noHeaders = !gxx ? 'no g++' : !headers ? 'no cuDNN 9 headers found in /usr/include, /usr/local/cuda/include or beside a libcudnn the loader tries (install libcudnn9-dev, or the nvidia-cudnn-cu12 wheel)' : '';

describe.skipIf(noHeaders)(`native/cudnn_decls.h against cuDNN's own headers${noHeaders ? ` (skipped: ${noHeaders})` : ''}`, () => {
  it('every enum value, the perf struct and each entry point\'s parameters match', () => {
    const r = spawnSync('g++', ['-std=c++17', '-fsyntax-only', '-Wno-deprecated-declarations', `-I${headers!.cudnn}`, `-I${headers!.cuda}`, CHECK_SRC], { encoding: 'utf8' });
    expect(r.stderr.split('\n').filter((l) => /error/.test(l)), `headers from ${headers!.cudnn}`).toEqual([]);
    expect(r.status).toBe(0);
  });
});
