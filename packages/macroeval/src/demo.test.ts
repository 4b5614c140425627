import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { demoFixtures } from './demo.js';

/** The committed demo inputs are the generator's output; FASTKERNELS_UPDATE_FIXTURES=1 rewrites them. */
const FIXTURES = join(import.meta.dirname, '..', 'fixtures');

describe('demo fixtures', () => {
  it('match their generator', () => {
    for (const [name, content] of Object.entries(demoFixtures())) {
      const text = JSON.stringify(content, null, 2) + '\n';
      const path = join(FIXTURES, name);
      if (process.env.FASTKERNELS_UPDATE_FIXTURES === '1') writeFileSync(path, text);
      expect(readFileSync(path, 'utf8'), `${name} is stale: run with FASTKERNELS_UPDATE_FIXTURES=1`).toBe(text);
    }
  });
});
