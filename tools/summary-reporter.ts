import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints the plain closing line CI reads, last: `vitest: N passed, N failed, N skipped`.
 * Load errors and unhandled errors count as failed.
 */
export class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const m of testModules) {
      if (m.errors().length > 0) failed += 1;
      for (const t of m.children.allTests()) {
        const s = t.result().state;
        if (s === 'passed') passed++;
        else if (s === 'failed') failed++;
        else skipped++;
      }
    }
    // Printed after vitest's own summary so it is the last line of the run.
    process.on('exit', () => process.stdout.write(`vitest: ${passed} passed, ${failed} failed, ${skipped} skipped\n`));
  }
}
