import type { Backend, Ops } from '@fastkernels/core';
import { geluAndMul, linearSiluAndMul, siluAndMul } from './activation.js';
import { pagedDecodeAttention, varlenPrefillAttention } from './attention.js';
import { add, copy, fill, mul } from './elementwise.js';
import { storeKvcache_ } from './kvcache.js';
import { embedding, embeddingMasked, linear, matmul } from './linear.js';
import { fusedAddRmsNorm, rmsNorm, softmax } from './norm.js';
import { rmsNormLinear } from './norm-linear.js';
import { rotaryEmbedding } from './rotary.js';
import { rotaryStoreKvcache } from './rotary-kv.js';
import { sample } from './sampler.js';

/** The Ops surface of the cpu backend; new outputs are allocated on `backend` (device 0). */
export function createCpuOps(backend: Backend): Ops {
  return Object.freeze({
    fill,
    copy,
    add: (a, b) => add(backend, a, b),
    mul: (a, b) => mul(backend, a, b),
    matmul: (a, b, options) => matmul(backend, a, b, options),
    rmsNorm: (x, weight, eps) => rmsNorm(backend, x, weight, eps),
    fusedAddRmsNorm: (x, residual, weight, eps) => fusedAddRmsNorm(backend, x, residual, weight, eps),
    siluAndMul: (x) => siluAndMul(backend, x),
    geluAndMul: (x, approximate) => geluAndMul(backend, x, approximate),
    rotaryEmbedding: (positions, query, key, cache, headSize, neox) => rotaryEmbedding(backend, positions, query, key, cache, headSize, neox),
    embedding: (ids, weight) => embedding(backend, ids, weight),
    embeddingMasked: (ids, weight, start) => embeddingMasked(backend, ids, weight, start),
    linear: (x, weight, bias) => linear(backend, x, weight, bias),
    linearSiluAndMul: (x, weight, bias) => linearSiluAndMul(backend, x, weight, bias),
    rmsNormLinear: (x, residual, normWeight, eps, weight, bias, act) => rmsNormLinear(backend, x, residual, normWeight, eps, weight, bias, act),
    softmax: (x, dim) => softmax(backend, x, dim),
    storeKvcache_,
    rotaryStoreKvcache: (positions, query, key, value, cache, headSize, neox, kCache, vCache, slots) =>
      rotaryStoreKvcache(backend, positions, query, key, value, cache, headSize, neox, kCache, vCache, slots),
    pagedDecodeAttention: (q, k, v, tables, lens, scale, window) => pagedDecodeAttention(backend, q, k, v, tables, lens, scale, window),
    varlenPrefillAttention: (q, k, v, cuQ, cuK, scale, causal, window) => varlenPrefillAttention(backend, q, k, v, cuQ, cuK, scale, causal, window),
    // the SampleHint (6th argument) only picks a launch strategy on other backends: one path here, ignored
    sample: (logits, temperature, topK, topP, seeds) => sample(backend, logits, temperature, topK, topP, seeds),
  } satisfies Ops);
}
