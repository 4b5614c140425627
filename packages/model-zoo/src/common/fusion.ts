import type { Module } from '@fastkernels/core';

/**
 * Whether `m` runs `cls`'s own forward: it is our baseline module (or a subclass that keeps its forward), not a
 * candidate kernel put in its place and not wrapped by `fastkernels capture` (instrument.ts subclasses each built
 * module and overrides forward). A layer may fuse the ops of its sub-modules into one backend call only then: a
 * candidate must run in the model as it is, and a capture must see every module's forward.
 */
export function runsOwnForward(m: Module, cls: abstract new (...args: never[]) => Module): boolean {
  return (m as unknown as { forward: unknown }).forward === (cls.prototype as unknown as { forward: unknown }).forward;
}
