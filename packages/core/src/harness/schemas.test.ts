import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CaptureIndexSchema } from './captures.js';
import { BenchReportSchema } from './report.js';
import { ResultsHeaderSchema, ResultsTaskLineSchema } from './results.js';

/**
 * The JSON Schemas under schemas/ at the repo root are generated from the zod schemas (z.toJSONSchema).
 * This test fails when they are stale; FASTKERNELS_UPDATE_SCHEMAS=1 rewrites them.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
const SCHEMAS: Readonly<Record<string, z.ZodType>> = {
  'bench-report.schema.json': BenchReportSchema,
  'bench-results-header.schema.json': ResultsHeaderSchema,
  'bench-results-task.schema.json': ResultsTaskLineSchema,
  'capture-index.schema.json': CaptureIndexSchema,
};

function render(name: string, schema: z.ZodType): string {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  return JSON.stringify({ $id: `https://fastkernels.dev/schemas/${name}`, ...json }, null, 2) + '\n';
}

describe('schemas/ (JSON Schema exports)', () => {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    it(`${name} is up to date`, () => {
      const file = join(ROOT, 'schemas', name);
      const want = render(name, schema);
      if (process.env.FASTKERNELS_UPDATE_SCHEMAS === '1') {
        mkdirSync(dirname(file), { recursive: true });
        writeFileSync(file, want);
      }
      expect(existsSync(file), `${file} is missing: run FASTKERNELS_UPDATE_SCHEMAS=1 npx vitest run --project core schemas`).toBe(true);
      expect(readFileSync(file, 'utf8')).toBe(want);
    });
  }
});
