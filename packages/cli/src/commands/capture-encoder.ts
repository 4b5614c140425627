/**
 * `fastkernels capture` on an encoder folder (runner 'encoder': BGE-M3, ColBERTv2): --documents seeded sequences with
 * lengths over --lengths embedded through the encoder runner's packed path with every registry-built module
 * instrumented (model-zoo's captureEncoder), written as OUT/index.json (+ values.safetensors) for
 * `fastkernels bench --captures`.
 */
import type { Backend, DType, ModuleRegistry } from '@fastkernels/core';
import { captureEncoder, documentsFor, documentsWorkloadName } from '@fastkernels/model-zoo';
import type { Io } from '../io.js';
import { printCaptureSummary, type CaptureCommonArgs } from './capture-common.js';
import { documentSpec, packedTokensFlag, type DocumentArgs } from './e2e-encoder.js';

export interface EncoderCaptureArgs extends CaptureCommonArgs, DocumentArgs {}

/** Documents a capture embeds by default (e2e times E2E_DOCUMENTS). */
export const CAPTURE_DOCUMENTS = 64;

export function runEncoderCapture(argv: EncoderCaptureArgs, io: Io, backend: Backend, baseline: ModuleRegistry, dtype?: DType): void {
  const spec = documentSpec(argv, CAPTURE_DOCUMENTS);
  const startedAt = performance.now();
  const r = captureEncoder({
    baseline, dir: argv.model, backend, documents: documentsFor(argv.model, spec), workload: documentsWorkloadName(spec), outDir: argv.out, model: argv.model,
    maxNumBatchedTokens: packedTokensFlag(argv), ...(dtype ? { dtype } : {}),
  });
  printCaptureSummary(io, argv, r, { model: argv.model, workload: r.index.workload, what: `${r.documents} documents (${r.tokens} tokens, ${r.batches} packed batches)`, startedAt });
}
