import { describe, expect, it } from 'vitest';
import { graphCaptureBlocker, markNotGraphCapturable } from './graph-capture.js';
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
});
