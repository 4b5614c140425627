/**
 * What the compile helper returns, parsed and checked (pure; unit-tested against recorded fixtures), and the
 * launch plan built from it: the compiled kernel's exact parameter list read from its PTX `.param`
 * declarations, mapped onto the kernel's runtime arguments plus the scratch pointers Triton 3.x appends
 * (global_scratch since 3.2, profile_scratch since 3.5), and packed with backend-cuda's argument layout.
 */
import { layoutArgs, type ArgLayout, type ArgType, type ScalarArgType } from '@fastkernels/backend-cuda';

/** One compiled Triton kernel as the helper describes it. */
export interface CompiledTriton {
  /** The CUfunction name in the cubin. */
  readonly name: string;
  readonly cubin: Uint8Array;
  /** Dynamic shared memory the kernel needs at launch, bytes. */
  readonly shared: number;
  readonly numWarps: number;
  readonly numCtas: number;
  readonly globalScratchSize: number;
  readonly globalScratchAlign: number;
  readonly profileScratchSize: number;
  readonly profileScratchAlign: number;
  readonly launchCooperativeGrid: boolean;
  readonly launchPdl: boolean;
  /** The `.param` declarations of the PTX entry, in order, as Triton emitted them. */
  readonly ptxParams: readonly string[];
  readonly argNames: readonly string[];
  readonly constexprNames: readonly string[];
  /** The constexpr values used (including defaults taken from the Python source), JSON-shaped. */
  readonly constexprs: Readonly<Record<string, unknown>>;
  /** The full signature sent to Triton (constexprs as 'constexpr'). */
  readonly signature: Readonly<Record<string, string>>;
  readonly triton: string;
  readonly compileMs: number;
  /** Triton's metadata, every JSON-able field (for diagnostics). */
  readonly metadata: Readonly<Record<string, unknown>>;
}

type Json = Record<string, unknown>;

function field<T>(o: Json, k: string, check: (v: unknown) => v is T, what: string): T {
  const v = o[k];
  if (!check(v)) throw new Error(`Triton helper result: '${k}' should be ${what}, got ${JSON.stringify(v)?.slice(0, 80)}`);
  return v;
}
const isStr = (v: unknown): v is string => typeof v === 'string';
const isNat = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isBool = (v: unknown): v is boolean => typeof v === 'boolean';
const isStrArr = (v: unknown): v is string[] => Array.isArray(v) && v.every(isStr);
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Parse a compile result (the helper's `result` object, or the JSON stored next to a cached cubin with the
 * cubin passed separately). Throws naming the bad field.
 */
export function parseCompileResult(raw: unknown, cubin?: Uint8Array): CompiledTriton {
  if (!isObj(raw)) throw new Error('Triton helper result: not an object');
  const o = raw;
  let bin = cubin;
  if (!bin) {
    const b64 = field(o, 'cubin_b64', isStr, 'a base64 string');
    const buf = Buffer.from(b64, 'base64');
    bin = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  if (bin.byteLength < 4 || bin[0] !== 0x7f || bin[1] !== 0x45 || bin[2] !== 0x4c || bin[3] !== 0x46) throw new Error('Triton helper result: the cubin is not an ELF image');
  const sig = field(o, 'signature', isObj, 'an object');
  for (const [k, v] of Object.entries(sig)) if (!isStr(v)) throw new Error(`Triton helper result: signature['${k}'] should be a string`);
  return {
    name: field(o, 'name', isStr, 'a string'),
    cubin: bin,
    shared: field(o, 'shared', isNat, 'a byte count'),
    numWarps: field(o, 'num_warps', isNat, 'an integer'),
    numCtas: o.num_ctas === undefined ? 1 : field(o, 'num_ctas', isNat, 'an integer'),
    globalScratchSize: o.global_scratch_size === undefined ? 0 : field(o, 'global_scratch_size', isNat, 'a byte count'),
    globalScratchAlign: o.global_scratch_align === undefined ? 1 : field(o, 'global_scratch_align', isNat, 'an integer'),
    profileScratchSize: o.profile_scratch_size === undefined ? 0 : field(o, 'profile_scratch_size', isNat, 'a byte count'),
    profileScratchAlign: o.profile_scratch_align === undefined ? 1 : field(o, 'profile_scratch_align', isNat, 'an integer'),
    launchCooperativeGrid: o.launch_cooperative_grid === undefined ? false : field(o, 'launch_cooperative_grid', isBool, 'a boolean'),
    launchPdl: o.launch_pdl === undefined ? false : field(o, 'launch_pdl', isBool, 'a boolean'),
    ptxParams: field(o, 'ptx_params', isStrArr, 'a list of strings'),
    argNames: field(o, 'arg_names', isStrArr, 'a list of strings'),
    constexprNames: field(o, 'constexpr_names', isStrArr, 'a list of strings'),
    constexprs: o.constexprs === undefined ? {} : field(o, 'constexprs', isObj, 'an object'),
    signature: sig as Record<string, string>,
    triton: field(o, 'triton', isStr, 'a version string'),
    compileMs: o.compile_ms === undefined ? 0 : field(o, 'compile_ms', isNum, 'a number'),
    metadata: o.metadata === undefined ? {} : field(o, 'metadata', isObj, 'an object'),
  };
}

/** The JSON stored next to a cached cubin (the result without the cubin bytes). */
export function resultForCache(raw: Json): Json {
  const { cubin_b64: _drop, ...rest } = raw;
  return rest;
}

// ------------------------------------------------------------------------------------------------ PTX params

export interface PtxParam {
  readonly name: string;
  /** PTX type: u64, b32, f32, b8 (arrays), ... */
  readonly ptxType: string;
  readonly size: number;
  readonly align: number;
  /** Declared `.ptr` (a pointer to global memory). */
  readonly pointer: boolean;
}

const PTX_SIZES: Readonly<Record<string, number>> = {
  u8: 1, s8: 1, b8: 1, u16: 2, s16: 2, b16: 2, f16: 2, bf16: 2, u32: 4, s32: 4, b32: 4, f32: 4, u64: 8, s64: 8, b64: 8, f64: 8,
};

/**
 * One `.param` declaration of a PTX entry: `.param .u64 .ptr .global .align 1 k_param_0`, `.param .u32 k_param_3`,
 * `.param .align 64 .b8 k_param_4[128]` (a by-value struct such as a TMA descriptor).
 */
export function parsePtxParam(decl: string): PtxParam {
  const s = decl.replace(/\s+/g, ' ').trim();
  const m = /^\.param (?:\.align (\d+) )?\.([a-z]+\d+) (\.ptr (?:\.(?:global|shared|const|local) )?(?:\.align \d+ )?)?([A-Za-z_$%][\w$]*)(?:\[(\d+)\])?$/.exec(s);
  if (!m) throw new Error(`cannot parse the PTX parameter declaration '${decl}'`);
  const ptxType = m[2]!;
  const elem = PTX_SIZES[ptxType];
  if (elem === undefined) throw new Error(`PTX parameter '${decl}': unknown type .${ptxType}`);
  const count = m[5] === undefined ? 1 : Number(m[5]);
  return { name: m[4]!, ptxType, size: elem * count, align: m[1] ? Number(m[1]) : elem, pointer: m[3] !== undefined };
}

// ------------------------------------------------------------------------------------------------ launch plan

/** How a runtime argument is written into its parameter slot. */
export type ArgEncoding = 'ptr' | 'int' | 'float' | 'f16' | 'bf16' | 'bool' | 'bytes';

export interface PlanParam {
  readonly role: 'arg' | 'global_scratch' | 'profile_scratch';
  /** For 'arg': the runtime argument's index and name. */
  readonly argIndex: number;
  readonly argName: string;
  readonly tritonType: string;
  readonly encoding: ArgEncoding;
  readonly argType: ArgType;
  readonly ptx: PtxParam;
}

export interface LaunchPlan {
  readonly params: readonly PlanParam[];
  readonly layout: ArgLayout;
  /** Number of runtime (non-constexpr) arguments the caller passes. */
  readonly argCount: number;
  /** Parameter index of each scratch pointer (-1 when the kernel has none). */
  readonly globalScratchIndex: number;
  readonly profileScratchIndex: number;
}

const SCRATCH_ROLES = [[], ['global_scratch'], ['global_scratch', 'profile_scratch']] as const;

const SCALAR_ARG: Readonly<Record<string, { argType: ScalarArgType; encoding: ArgEncoding }>> = {
  i8: { argType: 'i8', encoding: 'int' }, i16: { argType: 'i16', encoding: 'int' }, i32: { argType: 'i32', encoding: 'int' }, i64: { argType: 'i64', encoding: 'int' },
  u8: { argType: 'u8', encoding: 'int' }, u16: { argType: 'u16', encoding: 'int' }, u32: { argType: 'u32', encoding: 'int' }, u64: { argType: 'u64', encoding: 'int' },
  fp16: { argType: 'u16', encoding: 'f16' }, bf16: { argType: 'u16', encoding: 'bf16' }, fp32: { argType: 'f32', encoding: 'float' }, fp64: { argType: 'f64', encoding: 'float' },
};
const BY_SIZE: Readonly<Record<number, ScalarArgType>> = { 1: 'u8', 2: 'u16', 4: 'u32', 8: 'u64' };

/**
 * Map the compiled kernel's PTX parameters onto its runtime arguments. The first parameters are the
 * non-constexpr arguments in declaration order; what follows are the scratch pointers this Triton appends
 * (0, 1 or 2 of them: read from the count, never assumed), each 8 bytes.
 */
export function buildLaunchPlan(c: CompiledTriton): LaunchPlan {
  const constexpr = new Set(c.constexprNames);
  const runtime = c.argNames.filter((n) => !constexpr.has(n));
  const ptx = c.ptxParams.map(parsePtxParam);
  const extra = ptx.length - runtime.length;
  if (extra < 0 || extra >= SCRATCH_ROLES.length) {
    throw new Error(
      `${c.name}: the compiled kernel has ${ptx.length} parameters but ${runtime.length} runtime arguments (${runtime.join(', ')}); ` +
        `expected ${runtime.length} to ${runtime.length + 2} (Triton ${c.triton} appends at most two scratch pointers)`,
    );
  }
  const params: PlanParam[] = [];
  runtime.forEach((name, i) => {
    const p = ptx[i]!;
    const tt = c.signature[name];
    if (tt === undefined) throw new Error(`${c.name}: no type for argument '${name}' in the signature`);
    params.push({ role: 'arg', argIndex: i, argName: name, tritonType: tt, ptx: p, ...argTypeFor(c.name, name, tt, p) });
  });
  let globalScratchIndex = -1;
  let profileScratchIndex = -1;
  SCRATCH_ROLES[extra]!.forEach((role, j) => {
    const idx = runtime.length + j;
    const p = ptx[idx]!;
    if (p.size !== 8) throw new Error(`${c.name}: parameter ${idx} (${role}) should be a 64-bit pointer, the PTX declares '${c.ptxParams[idx]}'`);
    if (role === 'global_scratch') globalScratchIndex = idx;
    else profileScratchIndex = idx;
    params.push({ role, argIndex: -1, argName: role, tritonType: '*i8', encoding: 'ptr', argType: 'ptr', ptx: p });
  });
  return { params, layout: layoutArgs(params.map((p) => p.argType)), argCount: runtime.length, globalScratchIndex, profileScratchIndex };
}

function argTypeFor(kernel: string, name: string, tt: string, p: PtxParam): { argType: ArgType; encoding: ArgEncoding } {
  const mismatch = (want: string) =>
    new Error(`${kernel}: argument '${name}' is ${tt} (${want}) but the compiled kernel declares '.${p.ptxType}' of ${p.size} bytes`);
  if (tt.startsWith('*')) {
    if (p.size !== 8) throw mismatch('a 64-bit pointer');
    return { argType: 'ptr', encoding: 'ptr' };
  }
  if (tt === 'i1' || tt === 'u1') {
    const t = BY_SIZE[p.size];
    if (!t) throw mismatch('a boolean');
    return { argType: t, encoding: 'bool' };
  }
  const s = SCALAR_ARG[tt === 'f32' ? 'fp32' : tt];
  if (!s) {
    // Anything else Triton passes by value (e.g. a TMA descriptor): raw bytes of the declared size.
    return { argType: { struct: p.size, align: p.align }, encoding: 'bytes' };
  }
  const size = s.argType === 'i64' || s.argType === 'u64' || s.argType === 'f64' ? 8 : s.argType === 'i32' || s.argType === 'u32' || s.argType === 'f32' ? 4 : s.argType === 'u16' || s.argType === 'i16' ? 2 : 1;
  if (size !== p.size) throw mismatch(`${size} bytes`);
  return s;
}

/** Bytes of a scratch buffer for a launch: per program, times the programs of the grid, times CTAs per program. */
export function scratchBytes(perProgram: number, gridPrograms: number, numCtas: number): number {
  return perProgram > 0 ? perProgram * gridPrograms * Math.max(1, numCtas) : 0;
}
