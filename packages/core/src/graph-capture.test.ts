import { describe, expect, it } from 'vitest';
import { graphCaptureBlocker, markNotGraphCapturable, setCaptureBlocker } from './graph-capture.js';
import { Module } from './module.js';

class Plain extends Module {
  forward(): null {
    return null;
  }
}
class OutOfProcess extends Plain {}
markNotGraphCapturable(OutOfProcess, 'runs in another process');
class Sub extends OutOfProcess {}

describe('graph-capture marks', () => {
  it('classes are capturable unless marked; the mark is inherited and does not leak to the base', () => {
    expect(graphCaptureBlocker(Plain)).toBeUndefined();
    expect(graphCaptureBlocker(OutOfProcess)).toBe('runs in another process');
    expect(graphCaptureBlocker(Sub)).toBe('runs in another process');
  });

  it('a set is blocked by any marked class, each named with its task', () => {
    expect(setCaptureBlocker([{ taskId: 'L1/relu', cls: Plain }])).toBeUndefined();
    expect(setCaptureBlocker([])).toBeUndefined();
    expect(setCaptureBlocker([{ taskId: 'L1/relu', cls: Plain }, { taskId: 'L1/rms_norm', cls: Sub }, { taskId: 'L1/gelu', cls: OutOfProcess }])).toBe('L1/rms_norm: runs in another process; L1/gelu: runs in another process: not capturable');
  });
});
