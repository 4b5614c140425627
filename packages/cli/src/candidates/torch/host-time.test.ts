import { describe, expect, it } from 'vitest';
import { workerHostMs } from './module.js';

describe("a PyTorch candidate's host time (the escape check's clock)", () => {
  it('subtracts the measured fixed cost of the timing path', () => {
    expect(workerHostMs({ ms: 0.1, host_ms: 0.3, host_fixed_ms: 0.15 })).toBeCloseTo(0.15, 12);
  });

  it('never reads below the device time it encloses when the fixed cost measured more than this call paid (the H100 failure)', () => {
    // sitting 29 on an H100: device 0.1106 ms, host 0.1432 ms, fixed 0.1722 ms gave -0.029 ms and a REWARD_HACK
    expect(workerHostMs({ ms: 0.1106, host_ms: 0.1432, host_fixed_ms: 0.1722 })).toBe(0.1106);
  });

  it('keeps work that escaped the events visible: a host clock far above device time plus the fixed cost stays large', () => {
    expect(workerHostMs({ ms: 0.004, host_ms: 5.2, host_fixed_ms: 0.02 })).toBeCloseTo(5.18, 12);
  });

  it('a missing, negative or non-finite raw clock is not a valid time', () => {
    expect(workerHostMs({ ms: 0.1 })).toBeNaN();
    expect(workerHostMs({ ms: 0.1, host_ms: -1, host_fixed_ms: 0 })).toBeNaN();
    expect(workerHostMs({ ms: 0.1, host_ms: Number.NaN })).toBeNaN();
    expect(workerHostMs({ host_ms: 0.3 })).toBeNaN();
  });

  it('ignores a fixed cost that is missing, negative or not finite', () => {
    expect(workerHostMs({ ms: 0.1, host_ms: 0.3 })).toBe(0.3);
    expect(workerHostMs({ ms: 0.1, host_ms: 0.3, host_fixed_ms: -2 })).toBe(0.3);
    expect(workerHostMs({ ms: 0.1, host_ms: 0.3, host_fixed_ms: Number.POSITIVE_INFINITY })).toBe(0.3);
  });
});
