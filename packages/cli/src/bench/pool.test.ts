import { describe, expect, it } from 'vitest';
import { lastWords } from './pool.js';

describe("lastWords: a dead worker's stderr on one line", () => {
  it('an out-of-memory abort: the FATAL ERROR line, none of the V8 frames or GC traces', () => {
    const stderr = [
      '', '<--- Last few GCs --->', '',
      '[24349:0x35d80d40]      193 ms: Mark-Compact 71.1 (103.7) -> 63.5 (96.1) MB, 2.98 / 0.00 ms  (average mu = 0.586) allocation failure',
      '', '<--- JS stacktrace --->', '',
      'FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory',
      '----- Native stack trace -----', '',
      ' 1: 0xb78db3 node::OOMErrorHandler(char const*, v8::OOMDetails const&) [node]',
      '15: 0xf5578f v8::internal::Builtin_ArrayPrototypeFill(int, unsigned long*, v8::internal::Isolate*) [node]',
      '16: 0x195e376  [node]',
    ].join('\n');
    expect(lastWords(stderr)).toBe('FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory');
  });

  it('anything else: its last three lines, without JS stack frames', () => {
    const stderr = 'warming up\nError: boom\n    at f (file:///x.js:1:2)\n    at g (node:internal/y:3:4)\nsegfault in kernel\n\nNode.js v20.20.2\n';
    expect(lastWords(stderr)).toBe('warming up | Error: boom | segfault in kernel');
    expect(lastWords('')).toBe('');
  });
});
