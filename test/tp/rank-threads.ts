/**
 * What the CPU tensor- and expert-parallel tests share: a rank script (test/tp/<name>.ts) bundled with esbuild, W ranks
 * run as worker threads of this process joined by backend-nccl's HostCollectives, fixture model folders with float32
 * random checkpoints, and the logits comparison.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { build } from 'esbuild';
import { HostCollectives } from '@fastkernels/backend-nccl';
import { baselineRegistry, writeRandomModelCheckpoint } from '@fastkernels/model-zoo';

const here = dirname(fileURLToPath(import.meta.url));
const FIXTURES = join(here, '..', '..', 'packages', 'model-zoo', 'fixtures');
const BANNER = "import { createRequire as __fkCreateRequire } from 'node:module'; const require = __fkCreateRequire(import.meta.url);";

/** Bundle test/tp/<name>.ts into `work`/<name>.mjs (workspace sources, not dist) and return its path. */
export async function bundleRankScript(name: string, work: string): Promise<string> {
  const outfile = join(work, `${name}.mjs`);
  await build({
    entryPoints: [join(here, `${name}.ts`)],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    conditions: ['@fastkernels/source'],
    banner: { js: BANNER },
    logLevel: 'warning',
  });
  return outfile;
}

interface RankFields {
  readonly rank: number;
  readonly world: number;
  readonly shared: SharedArrayBuffer | null;
}

/** Run `world` ranks (threads) of `script` on one job; resolves with every rank's result in rank order. */
export async function runRankThreads<J extends RankFields, R extends { readonly rank: number; readonly error?: string }>(script: string, world: number, job: Omit<J, keyof RankFields>): Promise<R[]> {
  const shared = world > 1 ? HostCollectives.shared(world, 1 << 16) : null;
  const workers = Array.from({ length: world }, (_, rank) => new Worker(script, { workerData: { ...job, rank, world, shared } }));
  try {
    const results = await Promise.all(
      workers.map((w) => new Promise<R>((resolve, reject) => {
        w.once('message', resolve);
        w.once('error', reject);
        w.once('exit', (code) => reject(new Error(`rank thread exited with ${code} before reporting`)));
      })),
    );
    for (const r of results) if (r.error) throw new Error(`rank ${r.rank}: ${r.error}`);
    return results;
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/** A model folder under `work`: a fixture's config with `over` applied, and a float32 random checkpoint unless configOnly. */
export function fixtureModelDir(work: string, name: string, fixture: string, over: Record<string, unknown>, options: { configOnly?: boolean; seed: number }): string {
  const raw = { ...JSON.parse(readFileSync(join(FIXTURES, fixture, 'config.json'), 'utf8')), ...over } as Record<string, unknown>;
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  if (options.configOnly) writeFileSync(join(dir, 'config.json'), JSON.stringify(raw));
  else writeRandomModelCheckpoint(dir, raw, { registry: baselineRegistry(), seed: options.seed, dtype: 'f32' });
  return dir;
}

/** max |a - b| over [prompt][step][vocab] logits. */
export function maxAbsDiff(a: number[][][], b: number[][][]): number {
  let m = 0;
  a.forEach((p, i) => p.forEach((row, s) => row.forEach((v, j) => (m = Math.max(m, Math.abs(v - b[i]![s]![j]!))))));
  return m;
}
