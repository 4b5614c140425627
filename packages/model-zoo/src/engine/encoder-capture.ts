/**
 * `fastkernels capture` for an encoder folder (runner 'encoder': BGE-M3, ColBERTv2): the model loaded from the
 * instrumented registry (CaptureRecorder), seeded documents embedded through the encoder runner's production path
 * (packed varlen batches, every pooling the model has), and every registry-built module's init arguments, forward
 * shapes (T = a batch's packed tokens, B its sequences) and integer inputs (ids, positions, cu_seqlens) written as the
 * CaptureIndex `fastkernels bench --captures` reads.
 */
import type { Backend, CaptureIndex, DType, ModuleRegistry } from '@fastkernels/core';
import { CaptureRecorder } from './capture.js';
import { loadEncoder } from './encoder-documents.js';

export interface EncoderCaptureOptions {
  readonly baseline: ModuleRegistry;
  readonly dir: string;
  readonly backend: Backend;
  readonly dtype?: DType;
  readonly initSeed?: number;
  readonly documents: readonly (readonly number[])[];
  /** The index's workload name (documentsWorkloadName). */
  readonly workload: string;
  readonly maxNumBatchedTokens?: number;
  readonly outDir: string;
  /** The model's name in the index (default: the folder). */
  readonly model?: string;
}

export interface EncoderCaptureResult {
  readonly path: string;
  readonly index: CaptureIndex;
  readonly documents: number;
  readonly tokens: number;
  readonly batches: number;
}

export function captureEncoder(o: EncoderCaptureOptions): EncoderCaptureResult {
  if (!o.documents.length) throw new RangeError('captureEncoder: no documents');
  const recorder = new CaptureRecorder(o.baseline);
  const enc = loadEncoder(o.dir, {
    backend: o.backend, registry: recorder.registry, ...(o.dtype ? { dtype: o.dtype } : {}), ...(o.initSeed !== undefined ? { initSeed: o.initSeed } : {}),
    ...(o.maxNumBatchedTokens !== undefined ? { maxNumBatchedTokens: o.maxNumBatchedTokens } : {}),
  });
  try {
    enc.runner.embed(o.documents, enc.poolings);
  } finally {
    enc.loaded.model.dispose();
  }
  const model = o.model ?? o.dir;
  const path = recorder.write(o.outDir, model, o.workload);
  const s = enc.runner.stats;
  return { path, index: recorder.index(model, o.workload), documents: s.sequences, tokens: s.tokens, batches: s.batches };
}
