import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { withTuning } from '../../../test/spine-helpers.js';
import { KERNEL_SOURCES } from '../../kernel-sources.generated.js';
import { PDL_READY_FILES } from '../../launch-tuning.js';
import { captureHooks, type CudaRuntime } from '../../runtime.js';
import type { CudaOps } from '../../ops.js';
import { fileKernel, spineKernel } from './common.js';
import { SpineContext } from './context.js';
import { cudaTuning } from '../../tuning/load.js';

/**
 * Every kernel of a file in PDL_READY_FILES may be launched with LAUNCH_PDL (launch.pdl): it may then start
 * before the kernel it depends on has finished, so it must wait (fk_pdl_entry: griddepcontrol.wait) before it touches
 * memory. This reads the embedded sources: each `extern "C" __global__` body must open with fk_pdl_entry();, except
 * the kernels of WAITS_LATER (below), which wait later for a stated reason, each checked by its own rule.
 */
/** What a GEMV that waits later must not do before its wait (it may run while the kernel before it writes). */
const BEFORE_WAIT_FORBIDDEN =
  /__ldg\(|fk_ld_dep\(|fk_ld_vec\(|fk_gemv_step\(|fk_gemv_store_row\(|fk_gemv_norm_x\(|fk_set\(|\by\s*\[|\bbias\s*\[|\bx\s*[[+,)]|\bxs\b|\bres_in\b|\bres_out\b|\bnorm_w\b/;

/** The one use of the norm weight allowed before the wait: fk_gemv_stream's copy of it into shared memory (FK_NORM_PF). */
const NORM_WEIGHT_PREFETCH = 'fk_gemv_norm_w_prefetch(nws, norm_w, K);';

/**
 * Why `body` (fk_gemv, fk_gemv_stream) is not right, or null: before the first fk_pdl_wait(); only weights are loaded
 * (fk_ld_stream, and the fused norm's weight by NORM_WEIGHT_PREFETCH: read-only, written by no kernel), never x, the
 * residual or the bias read or anything written.
 */
function waitsLaterProblem(body: string): string | null {
  const at = body.indexOf('fk_pdl_wait();');
  if (at < 0) return 'no fk_pdl_wait();';
  const before = body.slice(0, at).split(NORM_WEIGHT_PREFETCH).join('');
  if (!/fk_ld_stream\(/.test(before)) return 'no weight load before the wait (then it should open with fk_pdl_entry)';
  const bad = BEFORE_WAIT_FORBIDDEN.exec(before);
  if (bad) return `'${bad[0]}' before the wait`;
  if (!/fk_gemv_step\(|__ldg\(/.test(body.slice(at))) return 'x is never read after the wait';
  return null;
}

/**
 * fk_paged_decode_mma opens with fk_pdl_entry() unless built with FK_EARLY_KV (attention.decodeEarlyKv); that
 * build may read the block table and the cache before its wait (the contract: the kernel before writes only each
 * sequence's newest key, which it skips then) but must not read q, write anything, or call load_q before the wait.
 */
function earlyKvProblem(body: string): string | null {
  if (!/^#if !FK_EARLY_KV\s*fk_pdl_entry\(\);\s*#endif/.test(body.trimStart())) return 'the default build does not open with fk_pdl_entry()';
  const early = body.replace(/#if !FK_EARLY_KV[\s\S]*?#endif/g, '').replace(/#if FK_EARLY_KV\n([\s\S]*?)#endif/g, '$1');
  const main = early.search(/\n  fk_pdl_entry\(\);[ \t]*\n  before_wait = false;/); // unconditional: at the body's top level
  if (main < 0) return 'no unconditional wait before the newest key is loaded';
  if (!/if \(before_wait && ok && t == L - 1\) continue;/.test(early)) return 'the newest key is not skipped before the wait';
  let pre = early.slice(0, main);
  const exit = /if \(s_begin >= s_end\) \{[\s\S]*?return;\s*\}/.exec(pre);
  if (!exit || !/fk_pdl_entry\(\);[\s\S]*\bst\(/.test(exit[0])) return 'the empty-split exit writes before it waits';
  pre = pre.replace(exit[0], '');
  const lambda = pre.indexOf('auto load_q = [&]() {');
  if (lambda >= 0) {
    pre = pre.slice(0, lambda) + pre.slice(matchClose(pre, pre.indexOf('{', lambda), '{', '}', 'load_q: unbalanced braces') + 1);
  }
  const bad = /\bload_q\(\)|\bst\(|part_acc\[|part_ml\[|\bq\b|\bout\b/.exec(pre);
  if (bad) return `'${bad[0]}' before the wait`;
  if (!/\bissue\(\w+, \w+, pgs\[/.test(pre)) return 'no cache load before the wait (then it should open with fk_pdl_entry)';
  return null;
}
const WAITS_LATER_EARLY_KV = 'fk_paged_decode_mma';

/**
 * fk_paged_decode_combine reads its sequence's length before the wait (seq_lens is final once the decode kernel before it
 * lets it start: that kernel triggers only after its own wait, and never writes seq_lens) and nothing else: no partial, no
 * write, and no return before an unconditional wait (a CTA that left without waiting could let the grid end before the
 * decode kernel whose partials it merges, and the next kernel would read an output not yet written).
 */
function combineProblem(body: string): string | null {
  const at = body.search(/\n  fk_pdl_entry\(\);/); // at the body's top level
  if (at < 0) return 'no unconditional fk_pdl_entry()';
  const pre = body.slice(0, at);
  if (/\breturn\b/.test(pre)) return 'a return before the wait';
  const bad = /part_acc|part_ml|\bout\b|\bst\(|combine_splits\(|\w+\s*\[(?<!seq_lens\s*\[)/.exec(pre);
  if (bad) return `'${bad[0]}' before the wait`;
  if (!/seq_lens\[/.test(pre)) return 'nothing read before the wait (then it should open with fk_pdl_entry)';
  return null;
}
const WAITS_LATER_COMBINE = 'fk_paged_decode_combine';

/** The kernels that wait later, each with the rule its body is checked by. */
const WAITS_LATER: Readonly<Record<string, (body: string) => string | null>> = {
  fk_gemv: waitsLaterProblem, // streams its first weight vectors, then waits for x
  fk_gemv_stream: waitsLaterProblem, // its first FK_UNR chunks of weight, then waits for x
  [WAITS_LATER_EARLY_KV]: earlyKvProblem, // with FK_EARLY_KV: its first cache tiles, then waits for q and the newest key
  [WAITS_LATER_COMBINE]: combineProblem, // the sequence's length, then waits for the partials
};

/** The index of the `close` that matches the `open` at `at` in `src`; an Error with `error` when there is none. */
function matchClose(src: string, at: number, open: string, close: string, error: string): number {
  for (let i = at, depth = 0; i < src.length; i++) {
    if (src[i] === open) depth++;
    else if (src[i] === close && --depth === 0) return i;
  }
  throw new Error(error);
}

/** A kernel body with `from` replaced by `to` (which must occur in it), judged by `problem`: the exploit corpus's mutations. */
function mutator(body: string, problem: (body: string) => string | null): (from: string, to: string) => string | null {
  return (from, to) => {
    expect(body.includes(from), from).toBe(true);
    return problem(body.replace(from, to));
  };
}

/** [entry, body] of every extern "C" __global__ function of a source (comments stripped). */
function kernelBodies(source: string): [string, string][] {
  const src = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/[^\n]*/g, '');
  const out: [string, string][] = [];
  // the name is the identifier before the parameter list, after any __launch_bounds__(...) / __cluster_dims__(...) or a
  // macro standing for one (an upper-case name: gemv.cu's FK_STREAM_BOUNDS)
  const re = /extern "C" __global__\s+(?:void\s+)?(?:__\w+__\s*\([^)]*\)\s*|[A-Z][A-Z0-9_]+\s+)*(?:void\s+)?(\w+)\s*\(/g;
  for (let m = re.exec(src); m; m = re.exec(src)) {
    const i = matchClose(src, m.index + m[0].length - 1, '(', ')', `${m[1]}: unbalanced parentheses`);
    const open = src.indexOf('{', i);
    // braces are counted in the text: a kernel must keep them balanced across #if / #else branches too
    const j = matchClose(src, open, '{', '}', `${m[1]}: unbalanced braces (keep them balanced across #if / #else)`);
    out.push([m[1]!, src.slice(open + 1, j)]);
    re.lastIndex = j;
  }
  return out;
}

describe('PDL-ready kernels wait before touching memory', () => {
  it('the list is exactly the embedded files that include fk_pdl.cuh (what tools/compile-cu.sh also builds with FK_PDL=1)', () => {
    const including = Object.keys(KERNEL_SOURCES).filter((f) => KERNEL_SOURCES[f]!.includes('// ---- fk_pdl.cuh (inlined')).sort();
    expect(including.length).toBeGreaterThan(0);
    expect([...PDL_READY_FILES].sort()).toEqual(including);
  });
  for (const file of [...PDL_READY_FILES].sort()) {
    it(`${file}: every kernel opens with fk_pdl_entry() (or waits later for a stated reason)`, () => {
      const kernels = kernelBodies(KERNEL_SOURCES[file]!);
      const declared = KERNEL_SOURCES[file]!.replace(/\/\/[^\n]*/g, '').match(/extern "C" __global__/g)?.length ?? 0;
      expect(kernels.length, `${file}: kernels found vs declared`).toBe(declared);
      expect(kernels.length).toBeGreaterThan(0);
      for (const [entry, body] of kernels) {
        const rule = WAITS_LATER[entry];
        if (rule) expect(rule(body), `${file} ${entry}`).toBeNull();
        else expect(body.trimStart().startsWith('fk_pdl_entry();'), `${file} ${entry} starts with: ${body.trimStart().slice(0, 60)}`).toBe(true);
      }
    });
  }
  it('the early-KV check catches q read, a write, or no wait before the cache loads of fk_paged_decode_mma', () => {
    const [, body] = kernelBodies(KERNEL_SOURCES['attention_decode.cu']!).find(([e]) => e === WAITS_LATER_EARLY_KV)!;
    expect(earlyKvProblem(body)).toBeNull();
    const mutate = mutator(body, earlyKvProblem);
    // q loaded before the prologue (as the default build does) in the early build too
    expect(mutate('#if !FK_EARLY_KV\n  load_q();\n#endif', '  load_q();')).toBe("'load_q()' before the wait");
    // the empty-split exit writing its zeros without waiting
    expect(mutate('#if FK_EARLY_KV\n      fk_pdl_entry();', '#if FK_EARLY_KV\n')).toBe('the empty-split exit writes before it waits');
    // a default build that no longer opens with the wait
    expect(mutate('#if !FK_EARLY_KV\n  fk_pdl_entry();\n#endif', '')).toBe('the default build does not open with fk_pdl_entry()');
    // the newest key loaded early like the others
    expect(mutate('if (before_wait && ok && t == L - 1) continue;', '')).toBe('the newest key is not skipped before the wait');
    // q read before the wait some other way than load_q
    expect(mutate('  int pg_next = pgs[NS - 1];', '  u32 q0 = pack_raw(q);\n  int pg_next = pgs[NS - 1];')).toBe("'q' before the wait");
    // a wait that only some threads make
    expect(mutate('  fk_pdl_entry();\n  before_wait = false;', '  if (lane == 0) fk_pdl_entry();\n  before_wait = false;')).toBe(
      'no unconditional wait before the newest key is loaded',
    );
  });
  it('the combine check catches a partial read, a return, or a missing wait before the wait of fk_paged_decode_combine', () => {
    const [, body] = kernelBodies(KERNEL_SOURCES['attention_decode.cu']!).find(([e]) => e === WAITS_LATER_COMBINE)!;
    expect(combineProblem(body)).toBeNull();
    const mutate = mutator(body, combineProblem);
    const wait = '  fk_pdl_entry();';
    // the early exit of a sequence with nothing to merge taken before the wait
    expect(mutate(wait, '  if (L <= chunk) return;\n' + wait)).toBe('a return before the wait');
    // a partial read before the wait
    expect(mutate(wait, '  const float m0 = part_ml[0];\n' + wait)).toBe("'part_ml' before the wait");
    // another array read before the wait
    expect(mutate(wait, '  const int t0 = block_tables[0];\n' + wait)).toBe("'block_tables[' before the wait");
    // the wait made by some threads only
    expect(mutate(wait, '  if (threadIdx.x == 0) fk_pdl_entry();')).toBe('no unconditional fk_pdl_entry()');
  });
  it('a kernel whose braces only balance per #if branch is an error, not a hang', () => {
    const src = 'extern "C" __global__ void fk_b(int* y, int n) {\n  fk_pdl_entry();\n#if A\n  if (n > 0) {\n#else\n  if (n > 1) {\n#endif\n    y[0] = 1;\n  }\n}\n';
    expect(() => kernelBodies(src)).toThrowError(/fk_b: unbalanced braces/);
  });
  it('the check catches a kernel that reads before it waits', () => {
    const bad = 'extern "C" __global__ void __launch_bounds__(256) fk_x(float* y, const float* x) {\n  const float v = x[0];\n  fk_pdl_entry();\n  y[0] = v;\n}\n';
    const [[entry, body]] = kernelBodies(bad) as [[string, string]];
    expect(entry).toBe('fk_x');
    expect(body.trimStart().startsWith('fk_pdl_entry();')).toBe(false);
  });
  it('the check of a kernel that waits later catches x, bias, y or the fused norm inputs touched before its wait', () => {
    const gemvLike = (pre: string) =>
      `extern "C" __global__ void fk_g(float* y, const float* x, const float* w, const float* bias, long long xs) {\n  uint4 a = fk_ld_stream(w);\n${pre}  fk_pdl_wait();\n  fk_gemv_step(acc, a, x, xs, 1, 0);\n}\n`;
    for (const pre of ['', `  ${NORM_WEIGHT_PREFETCH}\n`]) {
      const [[, good]] = kernelBodies(gemvLike(pre)) as [[string, string]];
      expect(waitsLaterProblem(good), pre).toBeNull();
    }
    for (const pre of ['  float v = x[0];\n', '  fk_gemv_step(acc, a, x, xs, 1, 0);\n', '  float b = bias[0];\n', '  y[0] = 0.f;\n', '  float q = __ldg(x + 1);\n',
      '  fk_gemv_norm_x(xn, x, res_in, res_out, norm_w, nws, K, eps);\n', '  float r = res_in[0];\n', '  float g = norm_w[0];\n',
      '  fk_gemv_norm_w_prefetch(nws, res_in, K);\n', '  fk_gemv_norm_w_prefetch(nws, x, K);\n', '  uint4 e = fk_ld_dep(xv);\n', '  V a0 = fk_ld_vec(x, 0);\n']) {
      const [[, body]] = kernelBodies(gemvLike(pre)) as [[string, string]];
      expect(waitsLaterProblem(body), pre).not.toBeNull();
    }
  });
});

describe('which launches are PDL launches (spineKernel / fileKernel)', () => {
  // a device of compute capability `major`, in a graph capture or not; compile() is recorded instead of run
  const ctxFor = (major: number, capturing: boolean) => {
    const rt = { properties: () => ({ major }), capturing } as unknown as CudaRuntime;
    const ctx = new SpineContext(() => rt, {} as CudaOps);
    const compiled: string[][] = [];
    const kernel = ctx.kernel.bind(ctx);
    ctx.kernel = (spec) => {
      const k = kernel(spec);
      k.compile = () => (compiled.push([...(spec.options ?? [])]), k);
      return k;
    };
    return { ctx, compiled };
  };
  const withPdl = <R>(pdl: boolean, pdlEager: boolean, fn: () => R): R => withTuning('launch', { pdl, pdlEager }, fn);
  it.skipIf(process.env.FASTKERNELS_TUNING !== undefined)('defaults: PDL on, in graph captures only', () => {
    expect(cudaTuning().launch.pdl).toBe(true);
    expect(cudaTuning().launch.pdlEager).toBe(false);
  });
  it('PDL on, sm_90, in a capture: a PDL-ready file is built with FK_PDL=1 and launched with LAUNCH_PDL; other files are not', () => {
    withPdl(true, false, () => {
      const { ctx } = ctxFor(9, true);
      const norm = spineKernel(ctx, 'norm.cu', 'fk_rms_norm', { FK_T: '__nv_bfloat16', FK_VEC: 8 });
      expect(norm.spec.pdl).toBe(true);
      expect(norm.spec.options).toEqual(['-DFK_T=__nv_bfloat16', '-DFK_VEC=8', '-DFK_PDL=1']);
      const dec = fileKernel(ctx, 'attention_decode.cu', 'fk_paged_decode_combine', ['-DFK_T=float']);
      expect(dec.spec.pdl).toBe(true);
      expect(dec.spec.options).toContain('-DFK_PDL=1');
      const other = fileKernel(ctx, 'runtime.cu', 'fk_axpi', ['-DX=1']);
      expect(other.spec.pdl).toBe(false);
      expect(other.spec.options).toEqual(['-DX=1']);
    });
  });
  it('PDL on, sm_90, eager: the plain build is launched; the PDL build is compiled before the next capture, not now', () => {
    withPdl(true, false, () => {
      const { ctx, compiled } = ctxFor(9, false);
      const norm = spineKernel(ctx, 'norm.cu', 'fk_rms_norm', { FK_T: '__nv_bfloat16', FK_VEC: 8 });
      spineKernel(ctx, 'norm.cu', 'fk_rms_norm', { FK_T: '__nv_bfloat16', FK_VEC: 8 }); // queued once
      expect(norm.spec.pdl).toBe(false);
      expect(norm.spec.options).toEqual(['-DFK_T=__nv_bfloat16', '-DFK_VEC=8']);
      fileKernel(ctx, 'runtime.cu', 'fk_axpi', ['-DX=1']); // not PDL-ready: nothing queued
      expect(compiled).toEqual([]); // an eager-only process (the sweep, bench) never compiles PDL builds
      ctx.compileForCapture(); // what the runtime's capture hook calls before streamBeginCapture
      expect(compiled).toEqual([['-DFK_T=__nv_bfloat16', '-DFK_VEC=8', '-DFK_PDL=1']]);
      ctx.compileForCapture();
      expect(compiled).toHaveLength(1);
    });
  });
  it('the capture hook compiles the queued builds of its own runtime only', () => {
    withPdl(true, false, () => {
      const { ctx, compiled } = ctxFor(9, false);
      spineKernel(ctx, 'norm.cu', 'fk_rms_norm', { FK_T: '__nv_bfloat16', FK_VEC: 8 });
      for (const h of captureHooks) h({} as CudaRuntime); // another runtime's capture
      expect(compiled).toEqual([]);
      const rt = ctx.runtime;
      for (const h of captureHooks) h(rt);
      expect(compiled).toHaveLength(1);
    });
  });
  it('pdlEager: PDL launches outside captures too', () => {
    withPdl(true, true, () => {
      const k = spineKernel(ctxFor(9, false).ctx, 'norm.cu', 'fk_rms_norm', { FK_T: '__nv_bfloat16', FK_VEC: 8 });
      expect(k.spec.pdl).toBe(true);
      expect(k.spec.options).toContain('-DFK_PDL=1');
    });
  });
  it('PDL off, or an older GPU: the options are exactly the given ones, nothing is a PDL launch or compiled ahead', () => {
    for (const [on, major] of [[false, 9], [true, 8]] as const) {
      for (const capturing of [false, true]) {
        withPdl(on, true, () => {
          const { ctx, compiled } = ctxFor(major, capturing);
          const k = spineKernel(ctx, 'norm.cu', 'fk_rms_norm', { FK_T: '__nv_bfloat16', FK_VEC: 8 });
          expect(k.spec.pdl).toBe(false);
          expect(k.spec.options).toEqual(['-DFK_T=__nv_bfloat16', '-DFK_VEC=8']);
          expect(compiled).toEqual([]);
        });
      }
    }
  });
  it('the spine ops build their kernels through spineKernel / fileKernel only (so none misses the PDL build)', () => {
    // the spine launchers, in their op groups' folders under src/ops/ (common.ts / context.ts here define the two)
    const ops = join(import.meta.dirname, '..');
    const launchers = ['activation/activation.ts', 'attention/attention.ts', 'attention/attention-plan.ts', 'attention/prefill-fa3.ts', 'attention/mla-decode.ts', 'embedding/embedding.ts',
      'kvcache/kvcache.ts', 'matmul/linear.ts', 'norm/rms-norm.ts', 'reduction/softmax.ts', 'rotary/rotary.ts', 'rotary/rotary-kv.ts',
      'sampling/sampler.ts', 'attention/dense-sdpa.ts', 'attention/dense-sdpa-fa3.ts'];
    for (const f of launchers) {
      expect(readFileSync(join(ops, f), 'utf8'), f).not.toMatch(/\bctx\.kernel\(/);
    }
    // every other non-test file of these group folders that builds a kernel from a SpineContext is in the list
    for (const g of new Set(launchers.map((f) => f.split('/')[0]))) {
      for (const x of readdirSync(join(ops, g)).filter((x) => x.endsWith('.ts') && !x.endsWith('.test.ts'))) {
        const text = readFileSync(join(ops, g, x), 'utf8');
        if (/\bSpineContext\b/.test(text)) expect(launchers, `${g}/${x} takes a SpineContext`).toContain(`${g}/${x}`);
      }
    }
  });
});
