/**
 * Triton's compile helper runs on a worker thread of ours (backend-triton's HelperClient). Started lazily, it
 * would appear while a candidate's constructor runs, and the integrity guard would rightly count a thread the
 * candidate did not start as one it did. A bench worker whose candidates use Triton starts the helper before the
 * guard takes its baseline, as it starts libuv's thread pool.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { TritonToolchain } from '@fastkernels/backend-triton';

const TRITON_IMPORT = /@fastkernels\/backend-triton/;
const RELATIVE_IMPORT = /(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;

/** Whether a candidate file, or a relative file it imports (transitively), imports @fastkernels/backend-triton. */
export function candidatesUseTriton(paths: readonly string[]): boolean {
  const seen = new Set<string>();
  const stack = [...paths.map((p) => resolve(p))];
  while (stack.length && seen.size < 500) {
    const p = stack.pop()!;
    if (seen.has(p)) continue;
    seen.add(p);
    let text: string;
    try {
      text = readFileSync(p, 'utf8');
    } catch {
      continue; // an extensionless import, a folder: the loader reports real problems
    }
    if (TRITON_IMPORT.test(text)) return true;
    for (const m of text.matchAll(RELATIVE_IMPORT)) stack.push(resolve(dirname(p), m[1]!));
  }
  return false;
}

/** Start the helper (its thread and the Python process) now; an error is left for the candidate's first compile to report. */
export function prestartTriton(): void {
  try {
    const tc = TritonToolchain.get();
    if (tc.availability().available) tc.hello();
  } catch {
    // no Triton here: the candidate's tritonKernel() says what to install
  }
}
