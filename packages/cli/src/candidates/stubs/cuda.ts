/**
 * `fastkernels stubs --lang cuda`: `L<k>/<stem>.cu` + `L<k>/<stem>.cu.json` per task. For the tasks below, a correct
 * naive kernel (one thread per element, or a block per row) that loads, compiles and passes as written; for the
 * others, a kernel with the task's parameter list and an empty body, bound with `"when": "0"` and
 * `"fallback": "baseline"`, so the stub runs the baseline until the kernel is written and `when` is lifted.
 */
import type { TaskDefinition } from '@fastkernels/core';

export interface StubFile {
  /** Path under the stubs folder. */
  readonly rel: string;
  readonly text: string;
}

/** Loads and stores in float for the dtypes the stubs serve. */
const PRELUDE = `#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace {
__device__ __forceinline__ float ld(const float* p) { return *p; }
__device__ __forceinline__ float ld(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float ld(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void st(float* p, float v) { *p = v; }
__device__ __forceinline__ void st(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void st(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
}  // namespace
`;

const C_TYPES = { f32: 'float', f16: '__half', bf16: '__nv_bfloat16' } as const;
/** One extern "C" entry per dtype, each calling the template `body` with `T` = the dtype's C type. */
const entries = (name: string, params: (t: string) => string, call: string): string =>
  Object.entries(C_TYPES).map(([dt, t]) => `extern "C" __global__ void ${name}_${dt}(${params(t)}) { ${call}; }`).join('\n');

interface Naive {
  readonly kernel: string;
  readonly manifest: Record<string, unknown>;
}

const NAIVE: Readonly<Record<string, Naive>> = {
  'L1/silu_and_mul': {
    kernel: `// x [T, 2D] (gate | up) -> y [T, D] = silu(gate) * up, silu(g) = g / (1 + exp(-g)); one thread per output element.
template <typename T>
__device__ void silu_and_mul(const T* x, T* y, long long n, int d) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long row = i / d;
    const int j = (int)(i % d);
    const float g = ld(&x[row * 2 * d + j]);
    const float u = ld(&x[row * 2 * d + d + j]);
    st(&y[i], g / (1.f + expf(-g)) * u);
  }
}

${entries('silu_and_mul', (t) => `const ${t}* x, ${t}* y, long long n, int d`, 'silu_and_mul(x, y, n, d)')}
`,
    manifest: {
      let: { D: 'D2 // 2' },
      steps: [{ kernel: 'silu_and_mul_{dtype}', grid: ['max(1, min(cdiv(T * D, 256), 65535))'], block: [256], args: ['x', 'out.y', 'T * D', 'D'] }],
    },
  },
  'L1/relu': {
    kernel: `// y = max(x, 0), one thread per element.
template <typename T>
__device__ void relu(const T* x, T* y, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) st(&y[i], fmaxf(ld(&x[i]), 0.f));
}

${entries('relu', (t) => `const ${t}* x, ${t}* y, long long n`, 'relu(x, y, n)')}
`,
    manifest: {
      steps: [{ kernel: 'relu_{dtype}', grid: ['max(1, min(cdiv(numel(input), 256), 65535))'], block: [256], args: ['input', 'out.out', 'numel(input)'] }],
    },
  },
  'L1/rms_norm': {
    kernel: `// One block of 256 threads per row: y = x / sqrt(mean(x^2) + eps) * w. With a residual, s = x + residual is rounded to
// the dtype, stored as the second output and normalised (vLLM's fused_add_rms_norm).
template <typename T>
__device__ void rms_norm(const T* x, const T* residual, const T* w, T* y, T* residual_out, int h, float eps) {
  __shared__ float partial[32];
  const long long base = (long long)blockIdx.x * h;
  float ss = 0.f;
  for (int j = threadIdx.x; j < h; j += blockDim.x) {
    float v = ld(&x[base + j]);
    if (residual) {
      st(&residual_out[base + j], v + ld(&residual[base + j]));
      v = ld(&residual_out[base + j]);
    }
    ss += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    ss = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x == 0) partial[0] = ss;
  }
  __syncthreads();
  const float inv_rms = rsqrtf(partial[0] / h + eps);
  for (int j = threadIdx.x; j < h; j += blockDim.x) {
    const float v = residual ? ld(&residual_out[base + j]) : ld(&x[base + j]);
    st(&y[base + j], v * inv_rms * ld(&w[j]));
  }
}

${entries('rms_norm', (t) => `const ${t}* x, const ${t}* residual, const ${t}* w, ${t}* y, ${t}* residual_out, int h, float eps`, 'rms_norm(x, residual, w, y, residual_out, h, eps)')}
`,
    manifest: {
      outputs: { residual: { shape: ['T', 'H'], when: 'has(residual)' } },
      steps: [{ kernel: 'rms_norm_{dtype}', grid: ['T'], block: [256], args: ['x', 'residual', 'weight', 'out.y', 'out.residual', 'H', 'eps'] }],
    },
  },
};

/** Tasks with a naive kernel in their stub. */
export const NAIVE_CUDA_TASKS: readonly string[] = Object.keys(NAIVE);

const ident = (s: string) => s.replace(/\W/g, '_');

/** The stub files of a task; `parameters` are the baseline's parameter names (pointer arguments of the skeleton). */
export function cudaStub(task: TaskDefinition, parameters: readonly string[]): StubFile[] {
  const dir = `L${task.level}`;
  const header = [
    `// Candidate for ${task.id} in CUDA C++: ${task.description}`,
    `// Mirrors ${task.mirrors}. The binding (launch geometry, arguments) is ${task.stem}.cu.json beside this file;`,
    `// \`fastkernels info ${task.id}\` shows the shapes, dtypes and tolerance.`,
  ];
  const naive = NAIVE[task.id];
  if (naive) {
    const manifest = { $comment: 'A correct naive kernel: make it fast. README: "Writing a candidate" explains every field.', task: task.id, dtypes: ['bf16', 'f16', 'f32'], ...naive.manifest };
    return [
      { rel: `${dir}/${task.stem}.cu`, text: `${header.join('\n')}\n${PRELUDE}\n${naive.kernel}` },
      { rel: `${dir}/${task.stem}.cu.json`, text: `${JSON.stringify(manifest, null, 2)}\n` },
    ];
  }
  // A skeleton: every tensor as a pointer (its dtype is the case's), the input dims as ints.
  const dims = [...new Set(task.inputs.flatMap((s) => s.shape.filter((d): d is string => typeof d === 'string')))];
  const unbound = [...new Set(task.outputs.flatMap((o) => o.shape.filter((d): d is string => typeof d === 'string' && !dims.includes(d))))];
  const inits = task.init.filter((p) => p.type === 'int' || p.type === 'float' || p.type === 'bool');
  const tensors = [...task.inputs.map((s) => ({ arg: s.name, c: `const void* ${ident(s.name)}` })), ...parameters.map((p) => ({ arg: p, c: `const void* ${ident(p)}` })), ...task.outputs.map((o) => ({ arg: `out.${o.name}`, c: `void* out_${ident(o.name)}` }))];
  const scalars = [...[...dims, ...unbound].map((d) => ({ arg: d, c: `int ${ident(d)}` })), ...inits.map((p) => ({ arg: p.name, c: `${p.type === 'float' ? 'float' : 'int'} ${ident(p.name)}` }))];
  const kernel = `${task.stem}_kernel`;
  const source = [
    ...header,
    '// A skeleton: the manifest runs the baseline ("when": "0", "fallback": "baseline") until this kernel is written.',
    '#include <cuda_bf16.h>',
    '',
    `extern "C" __global__ void ${kernel}(${[...tensors, ...scalars].map((a) => a.c).join(', ')}) {`,
    `  // TODO: compute ${task.outputs.map((o) => `out_${ident(o.name)} [${o.shape.join(', ')}]`).join(', ')} (pointers are to the case's dtype: cast them).`,
    '}',
    '',
  ].join('\n');
  const outputs = Object.fromEntries(task.outputs.filter((o) => o.optional).map((o) => [o.name, { shape: o.shape, when: `has(${task.inputs.find((s) => s.optional)?.name ?? task.inputs[0]?.name ?? 'x'})` }]));
  const manifest = {
    $comment: `Runs the baseline until ${kernel} is written: then set "when" to "1" (or the condition the kernel needs) and fit grid / block.${unbound.length ? ` ${unbound.join(', ')}: no input's shape gives ${unbound.length > 1 ? 'them' : 'it'}; write the expression in "let".` : ''}`,
    task: task.id,
    when: '0',
    fallback: 'baseline',
    ...(unbound.length ? { let: Object.fromEntries(unbound.map((d) => [d, '1'])) } : {}),
    ...(Object.keys(outputs).length ? { outputs } : {}),
    steps: [{ kernel, grid: [dims[0] ?? 1], block: [256], args: [...tensors, ...scalars].map((a) => a.arg) }],
  };
  return [
    { rel: `${dir}/${task.stem}.cu`, text: source },
    { rel: `${dir}/${task.stem}.cu.json`, text: `${JSON.stringify(manifest, null, 2)}\n` },
  ];
}
