#!/usr/bin/env node
// The GPU tests for the GPU host (no node, no npm there), run by the real vitest:
//   <out>/gpu-tests/<pkg>--<name>.test.mjs   every packages/*/src/**/*.gpu.test.ts and test/**/*.gpu.test.ts, bundled
//                                             by esbuild (shared code split into gpu-tests/chunks/); their `vitest`
//                                             imports go through tools/vitest-shim.ts (real vitest; no-ops in a child)
//   <out>/gpu-tests/vitest.config.mjs, reporter.mjs   tools/gpu-tests-config.mjs and tools/gpu-tests-reporter.mjs
//   <out>/vitest.tar.xz                       vitest and its runtime dependency closure from node_modules (with vite's
//                                             native rolldown binding for linux-x64), unpacked once by the runner
//   <out>/run-gpu-tests                       the runner; its last line is `gpu-tests: N passed, N failed`
// Usage: node tools/gpu-tests.mjs [outDir=dist/gpu-host]
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
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
  const shim = join(root, 'tools', 'vitest-shim.ts');
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
    const name = `${pkg}--${basename(f, '.gpu.test.ts')}.test`;
    // The entry re-exports the CUDA package as `fk`: child processes of the tests import the bundle for it.
    const entry = join(entryDir, `${name}.ts`);
    writeFileSync(entry, `export * as fk from ${JSON.stringify(cudaIndex)};\nimport ${JSON.stringify(f)};\n`);
    entryPoints[name] = entry;
    written.push(`${name}.mjs`);
  }
  // `vitest` in a test file -> the shim; the shim's own `vitest` import stays external (the real one, unpacked beside)
  const vitestThroughShim = {
    name: 'vitest-through-shim',
    setup(b) {
      b.onResolve({ filter: /^vitest$/ }, (args) => (args.importer === shim ? { path: 'vitest', external: true } : { path: shim }));
    },
  };
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
      plugins: [vitestThroughShim],
      conditions: ['@fastkernels/source'],
      banner: { js: BANNER },
      logLevel: 'warning',
      // No source maps: they were 11 MB of the bundle, which travels to the GPU host under a 64 MiB limit; the
      // bundled tests are not minified, so a stack trace's line in the .mjs still reads as the test's source.
      sourcemap: false,
    });
  } finally {
    rmSync(entryDir, { recursive: true, force: true });
  }
  copyFileSync(join(root, 'tools', 'gpu-tests-config.mjs'), join(testsDir, 'vitest.config.mjs'));
  copyFileSync(join(root, 'tools', 'gpu-tests-reporter.mjs'), join(testsDir, 'reporter.mjs'));
  packVitest(join(outDir, 'vitest.tar.xz'));
  const runner = join(outDir, 'run-gpu-tests');
  writeFileSync(runner, RUNNER);
  chmodSync(runner, 0o755);
  return written;
}

// Not carried: type packages, and lightningcss (vite's CSS minifier, a 10 MB native binary no test run loads).
const LEAVE_OUT = /^(@types\/|lightningcss)/;

/** vitest's runtime dependency closure: package folder (relative to the repo) for each package node resolves. */
export function vitestClosure() {
  const seen = new Set();
  const find = (name, from) => {
    for (let d = from; ; d = dirname(d)) {
      const p = join(d, 'node_modules', name);
      if (existsSync(join(p, 'package.json'))) return p;
      if (dirname(d) === d || d === root) return null;
    }
  };
  const walk = (dir) => {
    if (seen.has(dir)) return;
    seen.add(dir);
    const pj = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    for (const dep of Object.keys({ ...pj.dependencies, ...pj.optionalDependencies })) {
      if (LEAVE_OUT.test(dep)) continue;
      const p = find(dep, dir);
      if (p) walk(p); // an optional dependency for another platform is simply not installed
    }
  };
  walk(join(root, 'node_modules', 'vitest'));
  const dirs = [...seen].map((d) => relative(root, d)).sort();
  return dirs.filter((d) => !dirs.some((o) => d.startsWith(`${o}/`))); // a nested package travels inside its parent
}

/** Writes the closure as a tar.xz of node_modules/... (cached in dist/ while vitest's lockfile entries are unchanged). */
function packVitest(dest) {
  const dirs = vitestClosure();
  const lock = readFileSync(join(root, 'package-lock.json'), 'utf8');
  const stamp = JSON.stringify(dirs.map((d) => [d, JSON.parse(lock).packages?.[d]?.version ?? null]));
  const cache = join(root, 'dist', '.gpu-host-vitest.tar.xz');
  if (!(existsSync(cache) && existsSync(`${cache}.stamp`) && readFileSync(`${cache}.stamp`, 'utf8') === stamp)) {
    console.log(`gpu-tests: packing vitest and ${dirs.length - 1} packages (xz -T0 -6) ...`);
    execFileSync('sh', ['-c', `tar -chf - --exclude='*.d.ts' --exclude='*.d.mts' --exclude='*.d.cts' --exclude='*.map' --exclude='*.md' "$@" | xz -T0 -6 > "${cache}.tmp"`, 'tar', ...dirs], { cwd: root, stdio: 'inherit' });
    execFileSync('mv', ['-f', `${cache}.tmp`, cache]);
    writeFileSync(`${cache}.stamp`, stamp);
  }
  copyFileSync(cache, dest);
  const vitestVersion = JSON.parse(readFileSync(join(root, 'node_modules', 'vitest', 'package.json'), 'utf8')).version;
  writeFileSync(join(dirname(dest), 'vitest.version'), `${vitestVersion}\n`);
}

const RUNNER = `#!/usr/bin/env bash
# Runs the bundled GPU tests (gpu-tests/*.test.mjs) with vitest, one file at a time, each in its own process (a sticky
# CUDA error stays in its file). vitest and its dependencies are unpacked once from vitest.tar.xz beside the tests.
# Usage: ./run-gpu-tests [substring-of-file-name ...]   (e.g. ./run-gpu-tests exploits: the GPU exploit corpus)
# FASTKERNELS_TEST_FILTER=substring runs only the tests whose full name contains it (vitest --testNamePattern).
# FASTKERNELS_GPU=0 skips the gpu-tagged tests (with the reason), =1 runs them without /dev/nvidiactl.
# Other arguments go to vitest: --fileParallelism --maxWorkers=4 runs four files side by side (each still its own
# process), for groups whose time is their float64 references on the host's cores; files that time something (exploits,
# cuda-demo, e2e-candidates, torch-demo, softmax-routes-speed, memory-tuning, the printed speed cases) run alone.
set -uo pipefail
here="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
node_bin="$("$here/run" --print-node)" || { echo "gpu-tests: 0 passed, 1 failed (could not unpack node)"; exit 1; }
tests="$here/gpu-tests"
version="$(cat "$here/vitest.version" 2>/dev/null || echo '?')"
# unpack DIR: vitest.tar.xz into DIR/node_modules (node resolves \\\`vitest\\\` from the test files' folder)
unpack() {
  local dir="$1" tmp="$1/.node_modules.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp" || return 1
  if command -v xz >/dev/null 2>&1; then xz -dc "$here/vitest.tar.xz" | tar -xf - -C "$tmp" || { rm -rf "$tmp"; return 1; }
  elif command -v python3 >/dev/null 2>&1; then python3 -c 'import sys,tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$here/vitest.tar.xz" "$tmp" || { rm -rf "$tmp"; return 1; }
  else echo "run-gpu-tests: need xz or python3 to unpack vitest.tar.xz" >&2; rm -rf "$tmp"; return 1; fi
  rm -rf "$dir/node_modules" && mv "$tmp/node_modules" "$dir/node_modules" && rm -rf "$tmp" && echo "$version" > "$dir/node_modules/.fk-vitest"
}
if [ "$(cat "$tests/node_modules/.fk-vitest" 2>/dev/null)" != "$version" ]; then
  if ! unpack "$tests" 2>/dev/null; then
    # a read-only bundle: run a copy of the tests from a writable folder
    copy="\${TMPDIR:-/tmp}/fastkernels-gpu-tests-$(id -u)"
    if [ "$(cat "$copy/node_modules/.fk-vitest" 2>/dev/null)" != "$version" ] || [ "$tests" -nt "$copy" ]; then
      rm -rf "$copy" && mkdir -p "$copy" && cp -r "$tests/." "$copy/" && rm -rf "$copy/node_modules" && unpack "$copy" \\
        || { echo "gpu-tests: 0 passed, 1 failed (could not unpack vitest.tar.xz into $tests or $copy)"; exit 1; }
    fi
    tests="$copy"
  fi
fi
export FASTKERNELS_CUDA_ADDON="\${FASTKERNELS_CUDA_ADDON:-$here/fastkernels_cuda.node}"
# the bundle folder: test--exploits finds the CLI launcher ($here/run) and the exploit sets ($here/exploits) there
export FASTKERNELS_BUNDLE="\${FASTKERNELS_BUNDLE:-$here}"
export FORCE_COLOR=0 NO_COLOR=1 CI=1
pattern=()
if [ -n "\${FASTKERNELS_TEST_FILTER:-}" ]; then
  pattern=(--testNamePattern "$(printf '%s' "$FASTKERNELS_TEST_FILTER" | sed 's/[][\\\\.*^$+?(){}|/]/\\\\&/g')")
fi
exec "$node_bin" "$tests/node_modules/vitest/vitest.mjs" run --config "$tests/vitest.config.mjs" \${pattern[@]+"\${pattern[@]}"} "$@"
`;

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const out = resolve(process.argv[2] ?? join(root, 'dist', 'gpu-host'));
  const files = await bundleGpuTests(out);
  console.log(`gpu-tests: bundled ${files.length} files into ${join(out, 'gpu-tests')}: ${files.join(', ')}`);
}
