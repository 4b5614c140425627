// The GPU host's vitest reporter (dist/gpu-host/gpu-tests/reporter.mjs): one line a test, as results come, in the
// format bench/suites/verify/run.sh reads —
//   ok   <file> > <suite> > <test> (<ms> ms)      FAIL <name> (<ms> ms) + the error, indented      skip <name> (<reason>)
// then `gpu-tests-file: <file>: N passed, N failed, N skipped` after each file, and last of all
// `gpu-tests: N passed, N failed` (a file that fails to load, or an error outside a test, counts as one failure).
// Plain ESM with no imports from vitest, so it loads wherever the config does.
import { existsSync } from 'node:fs';

export const hasGpu = process.env.FASTKERNELS_GPU ? process.env.FASTKERNELS_GPU === '1' : existsSync('/dev/nvidiactl');
export const NO_GPU = 'no NVIDIA GPU (/dev/nvidiactl absent; FASTKERNELS_GPU=1 forces)';

const indent = (e) => String(e?.stack ?? e?.message ?? e).split('\n').slice(0, 25).map((l) => `     ${l}`).join('\n');

export class GpuTestsReporter {
  totals = { passed: 0, failed: 0, skipped: 0 };

  onTestCaseResult(test) {
    const r = test.result();
    const name = `${test.module.relativeModuleId} > ${test.fullName}`;
    const ms = test.diagnostic()?.duration;
    const time = ms === undefined ? '' : ` (${ms.toFixed(0)} ms)`;
    if (r.state === 'passed') console.log(`ok   ${name}${time}`);
    else if (r.state === 'failed') console.log(`FAIL ${name}${time}\n${(r.errors ?? []).map(indent).join('\n')}`);
    else console.log(`skip ${name} (${this.skipReason(test, r)})`);
  }

  skipReason(test, r) {
    if (r.note) return r.note;
    if (test.tags?.includes('gpu') && !hasGpu) return NO_GPU;
    if (process.env.FASTKERNELS_TEST_FILTER) return `FASTKERNELS_TEST_FILTER=${process.env.FASTKERNELS_TEST_FILTER}`;
    return test.options?.mode ?? 'skipped';
  }

  onTestModuleEnd(module) {
    const c = { passed: 0, failed: 0, skipped: 0 };
    for (const t of module.children.allTests()) {
      const s = t.result().state;
      if (s === 'passed') c.passed++;
      else if (s === 'failed') c.failed++;
      else c.skipped++;
    }
    const errors = module.errors();
    if (errors.length > 0) {
      c.failed++;
      console.log(`FAIL ${module.relativeModuleId} (the file did not load or ended with an error)\n${errors.map(indent).join('\n')}`);
    }
    for (const k of Object.keys(c)) this.totals[k] += c[k];
    console.log(`gpu-tests-file: ${module.relativeModuleId}: ${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped`);
  }

  onTestRunEnd(_modules, unhandledErrors) {
    for (const e of unhandledErrors) console.log(`FAIL (an error outside any test)\n${indent(e)}`);
    this.totals.failed += unhandledErrors.length;
    const { passed, failed, skipped } = this.totals;
    // after vitest's own closing output, so it is the last line of the run
    process.on('exit', () => {
      if (skipped > 0) process.stdout.write(`(${skipped} skipped)\n`);
      process.stdout.write(`gpu-tests: ${passed} passed, ${failed} failed\n`);
    });
  }
}
