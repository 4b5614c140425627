#!/usr/bin/env node
// Packs every publishable workspace package (`npm pack`) and installs the tarballs into an empty folder, as a user
// of the published packages would get them: the proof that they publish independently (test/pack-install.test.ts).
//
//   node tools/pack-install.mjs <empty-folder>
//
// The install is offline: the folder gets a package-lock.json whose @fastkernels/* entries are the tarballs and whose
// third-party entries (resolved URL + integrity) are copied from the repository's lockfile, so `npm ci --offline`
// takes them from the npm cache that the repository's own `npm ci` filled. (`npm install --offline` would need the
// registry's package documents, which `npm ci` never caches.)
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The workspace packages that publish: under packages/, not private. */
export function publishablePackages() {
  return readdirSync(join(ROOT, 'packages'))
    .map((d) => ({ dir: join(ROOT, 'packages', d), rel: `packages/${d}`, pkg: JSON.parse(readFileSync(join(ROOT, 'packages', d, 'package.json'), 'utf8')) }))
    .filter((p) => !p.pkg.private);
}

/** `npm pack` each package into `dest`; returns [{ name, version, tarball (file name), pkg }]. */
export function packAll(dest) {
  mkdirSync(dest, { recursive: true });
  return publishablePackages().map((p) => {
    const out = execFileSync('npm', ['pack', '--json', '--pack-destination', dest], { cwd: p.dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const [info] = JSON.parse(out);
    return { name: p.pkg.name, version: p.pkg.version, tarball: info.filename, files: info.files.map((f) => f.path), pkg: p.pkg, rel: p.rel };
  });
}

/**
 * A lockfile for an app that depends on every tarball. Third-party packages keep the repository's hoisting: an entry
 * `packages/cli/node_modules/x` becomes `node_modules/@fastkernels/cli/node_modules/x`, `node_modules/x` stays.
 */
export function lockFor(packed, tarballDir) {
  const repoLock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')).packages;
  const byRel = new Map(packed.map((p) => [p.rel, p]));
  const out = {};
  const rootDeps = {};
  for (const p of packed) {
    const spec = `file:${join(tarballDir, p.tarball)}`;
    rootDeps[p.name] = spec;
    const { name, version, dependencies, optionalDependencies, bin, engines } = p.pkg;
    out[`node_modules/${p.name}`] = { name, version, resolved: spec, dependencies, optionalDependencies, bin, engines };
  }
  /** Node's lookup over lockfile paths: `<from>/node_modules/<dep>`, then each parent folder's. */
  const locate = (from, dep) => {
    for (let at = from; ; ) {
      const key = at ? `${at}/node_modules/${dep}` : `node_modules/${dep}`;
      if (repoLock[key] && !repoLock[key].link) return key;
      if (!at) return undefined;
      const i = at.lastIndexOf('/node_modules/');
      at = i >= 0 ? at.slice(0, i) : '';
    }
  };
  const newPath = (key) => {
    for (const [rel, p] of byRel) if (key.startsWith(`${rel}/`)) return `node_modules/${p.name}${key.slice(rel.length)}`;
    return key;
  };
  const visit = (from, deps, optional) => {
    for (const dep of Object.keys(deps ?? {})) {
      if (dep.startsWith('@fastkernels/')) continue;
      const key = locate(from, dep);
      if (!key) {
        if (optional) continue;
        throw new Error(`${from || 'the root'} depends on ${dep}, which package-lock.json does not hold: run npm install`);
      }
      const target = newPath(key);
      if (out[target]) continue;
      const { dev, devOptional, peer, ...entry } = repoLock[key];
      out[target] = entry;
      visit(key, entry.dependencies, false);
      visit(key, entry.optionalDependencies, true);
    }
  };
  for (const p of packed) {
    visit(p.rel, p.pkg.dependencies, false);
    visit(p.rel, p.pkg.optionalDependencies, true);
  }
  return {
    name: 'fastkernels-pack-check',
    version: '0.0.0',
    lockfileVersion: 3,
    requires: true,
    packages: { '': { name: 'fastkernels-pack-check', version: '0.0.0', dependencies: rootDeps }, ...out },
  };
}

/** Pack, write the app's package.json + lockfile, `npm ci --offline` it. Returns the packed list. */
export function packInstall(app) {
  const tarballDir = join(app, 'tarballs');
  const packed = packAll(tarballDir);
  const lock = lockFor(packed, tarballDir);
  writeFileSync(join(app, 'package.json'), `${JSON.stringify({ name: lock.name, version: lock.version, private: true, dependencies: lock.packages[''].dependencies }, null, 2)}\n`);
  writeFileSync(join(app, 'package-lock.json'), `${JSON.stringify(lock, null, 2)}\n`);
  // --ignore-scripts: esbuild's postinstall only checks its binary; nothing of ours has an install script.
  execFileSync('npm', ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return packed;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const app = process.argv[2];
  if (!app) {
    process.stderr.write('usage: node tools/pack-install.mjs <empty-folder>\n');
    process.exit(2);
  }
  mkdirSync(app, { recursive: true });
  for (const p of packInstall(resolve(app))) process.stdout.write(`${p.name}@${p.version}: ${p.tarball} (${p.files.length} files)\n`);
}
