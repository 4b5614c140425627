#!/usr/bin/env node
// Bundles every packages/*/src/**/*.gpu.test.ts and test/**/*.gpu.test.ts (the GPU exploits, named test--<name>.mjs)
// into <out>/gpu-tests/*.mjs with 'vitest' aliased to
// tools/vitest-shim.ts, and writes <out>/run-gpu-tests, which runs them one process per file with the
// bundled node and ends with `gpu-tests: N passed, N failed`.
// Usage: node tools/gpu-tests.mjs [outDir=dist/gpu-host]
import { build } from 'esbuild';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BANNER = "import { createRequire as __fkCreateRequire } from 'node:module'; const require = __fkCreateRequire(import.meta.url);";

function findTests(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (name === 'node_modules' || name === 'dist') continue;
    if (statSync(p).isDirectory()) findTests(p, out);
    else if (name.endsWith('.gpu.test.ts')) out.push(p);
  }
  return out;
}

export async function bundleGpuTests(outDir = join(root, 'dist', 'gpu-host')) {
  const testsDir = join(outDir, 'gpu-tests');
  rmSync(testsDir, { recursive: true, force: true });
  mkdirSync(testsDir, { recursive: true });
  const files = readdirSync(join(root, 'packages'))
    .map((p) => join(root, 'packages', p, 'src'))
    .filter((d) => existsSync(d))
    .flatMap((d) => findTests(d))
    .sort();
  // the repo-level end-to-end GPU tests (test/exploits.gpu.test.ts: they spawn the bundled CLI; see the runner below)
  if (existsSync(join(root, 'test'))) files.push(...findTests(join(root, 'test')).sort());
  const cudaIndex = join(root, 'packages', 'backend-cuda', 'src', 'index.ts');
  const written = [];
  // One build over every test file with code splitting: the shared code (core, backends, model-zoo) lands once in
  // gpu-tests/chunks/ instead of in every test bundle, which keeps the carried bundle small.
  // Entries live inside the repo so package imports resolve through its node_modules.
  mkdirSync(join(root, 'dist'), { recursive: true });
  const entryDir = mkdtempSync(join(root, 'dist', 'gpu-test-entries-'));
  const entryPoints = {};
  for (const f of files) {
    const rel0 = relative(root, f).split('/');
    const pkg = rel0[0] === 'packages' ? rel0[1] : rel0[0]; // packages/<pkg>/... -> <pkg>; test/... -> test
    const name = `${pkg}--${basename(f, '.gpu.test.ts')}`;
    const rel = relative(root, f);
    // The entry re-exports the CUDA package as `fk` (child processes of the tests import the bundle for it)
    // and runs the tests unless it was imported as such a child.
    const contents = [
      `export * as fk from ${JSON.stringify(cudaIndex)};`,
      `import { run } from 'vitest';`,
      `import ${JSON.stringify(f)};`,
      `if (!process.env.FK_GPU_TEST_CHILD) { const c = await run(${JSON.stringify(rel)}); process.exitCode = c.failed ? 1 : 0; }`,
    ].join('\n');
    const entry = join(entryDir, `${name}.entry.ts`);
    writeFileSync(entry, contents);
    entryPoints[name] = entry;
    written.push(`${name}.mjs`);
  }
  try {
    await build({
      entryPoints,
      bundle: true,
      splitting: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      outdir: testsDir,
      outExtension: { '.js': '.mjs' },
      chunkNames: 'chunks/[name]-[hash]',
      alias: { vitest: join(root, 'tools', 'vitest-shim.ts') },
      conditions: ['@fastkernels/source'],
      banner: { js: BANNER },
      logLevel: 'warning',
      sourcemap: 'linked',
      sourcesContent: false,
    });
  } finally {
    rmSync(entryDir, { recursive: true, force: true });
  }
  const runner = join(outDir, 'run-gpu-tests');
  writeFileSync(runner, RUNNER);
  chmodSync(runner, 0o755);
  return written;
}

const RUNNER = `#!/usr/bin/env bash
# Runs the bundled GPU tests (one node process per file, so a sticky CUDA error stays contained).
# Usage: ./run-gpu-tests [substring-of-file-name ...]   (e.g. ./run-gpu-tests exploits: the GPU exploit corpus)
# FASTKERNELS_TEST_FILTER=substring runs only the tests whose full name contains it (e.g. one test of a long file).
set -uo pipefail
here="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
node_bin="$("$here/run" --print-node)" || { echo "gpu-tests: 0 passed, 1 failed (could not unpack node)"; exit 1; }
export FASTKERNELS_CUDA_ADDON="\${FASTKERNELS_CUDA_ADDON:-$here/fastkernels_cuda.node}"
# the bundle folder: test--exploits finds the CLI launcher ($here/run) and the exploit sets ($here/exploits) there
export FASTKERNELS_BUNDLE="\${FASTKERNELS_BUNDLE:-$here}"
export FORCE_COLOR=0
passed=0; failed=0; skipped=0
tmp="$(mktemp)"; trap 'rm -f "$tmp"' EXIT
for f in "$here"/gpu-tests/*.mjs; do
  if [ $# -gt 0 ]; then
    keep=0; for pat in "$@"; do case "$(basename "$f")" in *"$pat"*) keep=1;; esac; done
    [ $keep -eq 1 ] || continue
  fi
  echo "== $(basename "$f")"
  "$node_bin" --enable-source-maps "$f" 2>&1 | tee "$tmp"
  rc=\${PIPESTATUS[0]}
  line="$(grep '^gpu-tests-file:' "$tmp" | tail -1)"
  if [ -z "$line" ]; then
    echo "FAIL $(basename "$f"): the process exited with status $rc before reporting"
    failed=$((failed + 1)); continue
  fi
  p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\\1/')
  q=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\\2/')
  s=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\\3/')
  passed=$((passed + p)); failed=$((failed + q)); skipped=$((skipped + s))
done
[ $skipped -gt 0 ] && echo "($skipped skipped)"
echo "gpu-tests: $passed passed, $failed failed"
[ $failed -eq 0 ]
`;

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = resolve(process.argv[2] ?? join(root, 'dist', 'gpu-host'));
  const files = await bundleGpuTests(out);
  console.log(`gpu-tests: bundled ${files.length} files into ${join(out, 'gpu-tests')}: ${files.join(', ')}`);
}
