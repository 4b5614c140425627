// Types of bench/suites/decode-profile/decode-ablate.mjs (plain ESM run by the bundle's node; test/decode-ablate.test.ts imports it).
import type { Backend } from '@fastkernels/core';
export type AblatableOp = 'rmsNorm' | 'fusedAddRmsNorm' | 'rotaryStoreKvcache' | 'rotaryEmbedding' | 'storeKvcache_' | 'pagedDecodeAttention';
export const ABLATABLE: Readonly<Record<AblatableOp, (...args: never[]) => unknown>>;
export function parseAblate(text: string | undefined): AblatableOp[];
export function ablateOps(backend: Backend, names: readonly AblatableOp[]): Record<string, number>;
