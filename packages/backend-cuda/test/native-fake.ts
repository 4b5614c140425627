/**
 * What the addon's tests against a fake native library built with g++ (src/tensor-map-native.test.ts: libcuda;
 * src/ops/conv/cudnn-native.test.ts: libcudnn) need before they can run here: the built addon and g++.
 */
import { existsSync } from 'node:fs';
import { addonCandidates } from '../src/native.js';
import { hasGxx } from './host-cuda.js';

/** The built addon's path (the first candidate that exists), or undefined. */
export const builtAddon = addonCandidates().find((p) => existsSync(p));

/** Why an addon test against a fake `lib` cannot run here, or '' when it can. */
export function fakeLibrarySkip(lib: string): string {
  if (!builtAddon) return 'the addon is not built (npm run build:native -w @fastkernels/backend-cuda)';
  return hasGxx ? '' : `no g++ to build the fake ${lib}`;
}
