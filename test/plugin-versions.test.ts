import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuPlugin } from '@fastkernels/backend-cpu';
import { cudaPlugin } from '@fastkernels/backend-cuda';
import { ncclPlugin } from '@fastkernels/backend-nccl';
import { tritonPlugin } from '@fastkernels/backend-triton';
import { macroevalPlugin } from '@fastkernels/macroeval';
import { modelZooPlugin } from '@fastkernels/model-zoo';
import { describe, expect, it } from 'vitest';

// A plugin states its package's version (what a composed container reports); `changeset version` bumps package.json
// only, so this fails until the plugin's literal is bumped with it (docs/releasing.md).
const packages = join(dirname(fileURLToPath(import.meta.url)), '..', 'packages');
const versionOf = (dir: string) => (JSON.parse(readFileSync(join(packages, dir, 'package.json'), 'utf8')) as { version: string }).version;

describe('plugin versions', () => {
  it.each([
    ['backend-cpu', cpuPlugin],
    ['backend-cuda', cudaPlugin],
    ['backend-nccl', ncclPlugin],
    ['backend-triton', tritonPlugin],
    ['macroeval', macroevalPlugin],
    ['model-zoo', modelZooPlugin],
  ] as const)('%s states its package.json version', (dir, plugin) => {
    expect(plugin.version).toBe(versionOf(dir));
  });
});
