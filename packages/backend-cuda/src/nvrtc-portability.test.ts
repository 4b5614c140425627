// NVRTC compiles our kernels and candidates at run time with no host C library: `#include <stdint.h>`, `INFINITY` or
// `uintptr_t` compile under nvcc (which CI runs) but fail on the GPU host. Two did (a pool kernel, a demo candidate):
// this scan catches them where nvcc cannot. The bench labs are nvcc-only programs and are not scanned.
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const walk = (dir: string, keep: (f: string) => boolean): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.name === 'node_modules' || e.name === 'dist' ? [] : e.isDirectory() ? walk(join(dir, e.name), keep) : keep(e.name) ? [join(dir, e.name)] : [],
  );
/** What NVRTC reads: the kernel sources, the candidate examples, the TypeScript files that generate kernel source. */
const SOURCES = [
  ...walk(join(ROOT, 'packages', 'backend-cuda', 'kernels'), (f) => /\.cuh?$/.test(f)),
  ...walk(join(ROOT, 'examples'), (f) => /\.cuh?$/.test(f)),
  ...walk(join(ROOT, 'packages', 'backend-cuda', 'src'), (f) => /-source\.ts$/.test(f)),
];
/** NVRTC's built-in headers (cuda_fp16.h, cuda_bf16.h, mma.h, cuda/...) are fine; a host header is not. */
const FORBIDDEN: [RegExp, string][] = [
  [/#include\s*<(?!cuda_|mma\.h|cuda\/|cooperative_groups)[^>]+>/, 'a host header (NVRTC has no C library): declare what you need, e.g. unsigned long long for uintptr_t'],
  [/(?<![\w.])-?INFINITY\b/, 'INFINITY (math.h): use __int_as_float(0x7f800000) / __int_as_float(0xff800000)'],
  [/(?<![\w.'"])NAN\b/, 'NAN (math.h): use __int_as_float(0x7fffffff)'],
  [/\b(?:u?int(?:8|16|32|64)_t|uintptr_t|size_t)\b/, 'a <stdint.h> / <stddef.h> type: use int, long long, unsigned long long'],
];

describe('NVRTC portability of every source NVRTC compiles', () => {
  it('finds the sources', () => expect(SOURCES.length).toBeGreaterThan(10));
  it.each(SOURCES.map((f) => [relative(ROOT, f), f]))('%s uses no host header, macro or type', (_name, file) => {
    const lines = readFileSync(file, 'utf8').split('\n');
    const problems = lines.flatMap((l, i) => {
      const code = l.replace(/\/\/.*$/, ''); // comments may mention them
      return FORBIDDEN.filter(([re]) => re.test(code)).map(([, why]) => `line ${i + 1}: ${why}\n    ${l.trim()}`);
    });
    expect(problems, problems.join('\n')).toEqual([]);
  });
});
