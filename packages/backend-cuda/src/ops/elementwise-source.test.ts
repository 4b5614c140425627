import { describe, expect, it } from 'vitest';
import { elementwiseSource, geoBytes } from './elementwise-source.js';
import { exprKey, lit, singleOp, validateExpr, type Expr } from './expr.js';

/** silu(x) * y + z: the 3-op chain of the benchmark. */
const CHAIN3: Expr = {
  inputs: 3,
  nodes: [
    { op: 'silu', args: [{ input: 0 }] },
    { op: 'mul', args: [{ node: 0 }, { input: 1 }] },
    { op: 'add', args: [{ node: 1 }, { input: 2 }] },
  ],
};

const count = (s: string, re: RegExp) => (s.match(re) ?? []).length;

describe('generated elementwise source', () => {
  it('a 3-op chain is one kernel; the contiguous class loads and stores 16-byte vectors, 2 deep for 3 inputs, math in float', () => {
    const g = elementwiseSource({ expr: CHAIN3, inDTypes: ['bf16', 'bf16', 'bf16'], outDType: 'bf16', cls: { kind: 'contig', vec: 8 } });
    expect(count(g.source, /__global__/g)).toBe(1);
    expect(g.entry).toBe('fk_ew_contig');
    expect(g.source).toContain('FkV<__nv_bfloat16, 8> a0[2];');
    expect(g.source).toMatch(/reinterpret_cast<const FkV<__nv_bfloat16, 8>\*>\(in0\)\[i\]/);
    expect(g.source).toMatch(/reinterpret_cast<FkV<__nv_bfloat16, 8>\*>\(out\)\[i\] = r/);
    // bf16 -> float at the load, float -> bf16 (round to nearest even) once at the store
    expect(g.source).toContain('__bfloat162float(x)');
    expect(g.source).toContain('__float2bfloat16_rn');
    expect(g.source).toContain('const float t0 = (x0 / (float(1.0) + expf(-x0)));');
    expect(g.source).toContain('const float t2 = (t1 + x2);');
    // no index math in the contiguous class
    expect(g.source).not.toContain('FkGeo');
    expect(g.signature).toEqual(['ptr', 'ptr', 'ptr', 'ptr', 'i64']);
  });

  it('the strided class computes offsets from the sizes and strides it is passed; broadcast inputs load once a vector', () => {
    const g = elementwiseSource({
      expr: CHAIN3, inDTypes: ['f16', 'f32', 'f16'], outDType: 'f16',
      cls: { kind: 'strided', rank: 3, vec: 4, innerContig: [true, false, true], index: 'i32' },
    });
    expect(count(g.source, /__global__/g)).toBe(1);
    expect(g.source).toContain('struct FkGeo { int size[3]; int st[4][3]; };');
    expect(g.source).toContain('rem % g.size[d]');
    expect(g.source).toContain('o2[u] += idx * g.st[2][d];');
    expect(g.source).toContain('a0[u] = *reinterpret_cast<const FkV<__half, 4>*>(in0 + o1[u]);');
    expect(g.source).toContain('b1[u] = fk_ld_f32(in1[o2[u]]);');
    expect(g.source).toContain('__half2float(x)');
    expect(g.source).toContain('__float2half_rn');
    expect(g.signature).toEqual(['ptr', 'ptr', 'ptr', 'ptr', { struct: geoBytes(3, 3, 'i32'), align: 4 }, 'i32']);
    expect(geoBytes(3, 3, 'i32')).toBe(4 * 3 * (1 + 4)); // size[3] + st[4][3]: the struct in the source
  });

  it('scalar strided class with 64-bit indices; comparisons store bool; integer inputs compute in double', () => {
    const g = elementwiseSource({ expr: singleOp('gt', 2), inDTypes: ['i32', 'f32'], outDType: 'bool', cls: { kind: 'strided', rank: 2, vec: 1, innerContig: [true, true], index: 'i64' } });
    expect(g.source).toContain('struct FkGeo { long long size[2]; long long st[3][2]; };');
    expect(g.source).toContain('double fk_ld_i32(int x)');
    expect(g.source).toContain('unsigned char fk_st_bool(double x) { return (x != double(0) ? 1 : 0); }');
    expect(g.source).toContain('out[o0[u]] = fk_st_bool(t0)');
  });

  it('runtime scalars are double kernel arguments, compiled-in scalars are literals', () => {
    const e: Expr = { inputs: 1, params: 1, nodes: [{ op: 'mul', args: [{ input: 0 }, { param: 0 }] }, { op: 'add', args: [{ node: 0 }, { scalar: 0.5 }] }] };
    const g = elementwiseSource({ expr: e, inDTypes: ['f32'], outDType: 'f32', cls: { kind: 'contig', vec: 4 } });
    expect(g.source).toContain('double p0');
    expect(g.source).toContain('(x0 * float(p0))');
    expect(g.source).toContain('(t0 + float(0.5))');
    expect(g.signature).toEqual(['ptr', 'ptr', 'f64', 'i64']);
  });

  it('PyTorch formulas: gelu erf and tanh, softplus threshold, NaN-propagating maximum, clamp keeps NaN', () => {
    const binary = (op: string) => ['maximum', 'clamp_min'].includes(op);
    const src = (op: string, attrs?: Record<string, number | string | null>) => elementwiseSource({ expr: singleOp(op, binary(op) ? 2 : 1, attrs), inDTypes: binary(op) ? ['f32', 'f32'] : ['f32'], outDType: 'f32', cls: { kind: 'contig', vec: 4 } }).source;
    expect(src('gelu')).toContain('erff(x0 * float(0.7071067811865476))');
    expect(src('gelu', { approximate: 'tanh' })).toContain('tanhf(float(0.7978845608028654) * (x0 + float(0.044715) * x0 * x0 * x0))');
    expect(src('softplus', { beta: 2, threshold: 10 })).toContain('(x0 * float(2.0) > float(10.0)) ? x0');
    expect(src('maximum')).toContain('(x0 > x1 || x0 != x0) ? x0 : x1');
    expect(src('clamp_min')).toContain('((x0 != x0) ? x0 : fmaxf(x0, x1))');
  });

  it('ops that need a device function carry it once (floor division as PyTorch computes it)', () => {
    const e: Expr = { inputs: 2, nodes: [{ op: 'div_floor', args: [{ input: 0 }, { input: 1 }] }, { op: 'div_floor', args: [{ node: 0 }, { input: 1 }] }] };
    const src = elementwiseSource({ expr: e, inDTypes: ['f32', 'f32'], outDType: 'f32', cls: { kind: 'contig', vec: 4 } }).source;
    expect(count(src, /float fk_div_floor\(float a, float b\)/g)).toBe(1);
    expect(src).toContain('const float mod = fmodf(a, b);');
    expect(src).toContain('fk_div_floor(x0, x1)');
  });

  it('literals are exact and name inf / nan', () => {
    expect(lit(1, { c: 'float' })).toBe('float(1.0)');
    expect(lit(1e-5, { c: 'double' })).toBe('double(0.00001)');
    expect(lit(-Infinity, { c: 'float' })).toContain('-__int_as_float(0x7f800000)');
    expect(lit(-0, { c: 'float' })).toBe('float(-0.0)');
  });

  it('validation names the node; keys tell expressions apart', () => {
    expect(() => validateExpr({ inputs: 1, nodes: [{ op: 'nope', args: [{ input: 0 }] }] })).toThrow(/node 0: unknown op 'nope'/);
    expect(() => validateExpr({ inputs: 1, nodes: [{ op: 'add', args: [{ input: 0 }] }] })).toThrow(/takes 2 operands/);
    expect(() => validateExpr({ inputs: 1, nodes: [{ op: 'neg', args: [{ node: 0 }] }] })).toThrow(/not before it/);
    expect(() => validateExpr({ inputs: 1, nodes: [{ op: 'neg', args: [{ input: 1 }] }] })).toThrow(/reads input 1 of 1/);
    expect(exprKey(singleOp('gelu', 1, { approximate: 'tanh' }))).not.toBe(exprKey(singleOp('gelu', 1, { approximate: 'none' })));
    expect(exprKey(CHAIN3)).toBe('3:0:silu(i0)[];mul(n0,i1)[];add(n1,i2)[]');
  });
});
