/**
 * Errors raised by the CUDA runtime. Every failing driver, NVRTC or cuBLASLt call becomes a
 * `CudaError` naming the function and the library's own error name and description; the sticky
 * errors that destroy the context become a `CudaFatalError`.
 */

/** Driver error codes after which the CUDA context is unusable for the rest of the process. */
export const STICKY_CUDA_ERRORS: ReadonlyMap<number, string> = new Map([
  [214, 'CUDA_ERROR_ECC_UNCORRECTABLE'],
  [700, 'CUDA_ERROR_ILLEGAL_ADDRESS'],
  [702, 'CUDA_ERROR_LAUNCH_TIMEOUT'],
  [709, 'CUDA_ERROR_CONTEXT_IS_DESTROYED'],
  [714, 'CUDA_ERROR_HARDWARE_STACK_ERROR'],
  [715, 'CUDA_ERROR_ILLEGAL_INSTRUCTION'],
  [716, 'CUDA_ERROR_MISALIGNED_ADDRESS'],
  [717, 'CUDA_ERROR_INVALID_ADDRESS_SPACE'],
  [718, 'CUDA_ERROR_INVALID_PC'],
  [719, 'CUDA_ERROR_LAUNCH_FAILED'],
]);

/** Codes the driver returns for operations that are not allowed while a stream is being captured. */
const CAPTURE_ERRORS = new Set([900, 901, 902, 903, 904, 905, 906, 907]);

export type CudaLibrary = 'cuda' | 'nvrtc' | 'cublasLt';

export class CudaError extends Error {
  override name = 'CudaError';
  constructor(
    message: string,
    /** The library whose call failed. */
    readonly library: CudaLibrary,
    /** The failing function, e.g. `cuMemAlloc`. */
    readonly func: string,
    /** The numeric status (CUresult, nvrtcResult or cublasStatus_t). */
    readonly code: number,
    /** The symbolic name, e.g. `CUDA_ERROR_OUT_OF_MEMORY`. */
    readonly codeName: string,
  ) {
    super(message);
  }
}

/**
 * A sticky CUDA error (illegal address, launch failure, misaligned address, illegal instruction, ...):
 * the context is lost, every later CUDA call in this process fails. Run untrusted kernels in a child
 * process and restart it after this error.
 */
export class CudaFatalError extends CudaError {
  override name = 'CudaFatalError';
}

export function isStickyCudaError(code: number): boolean {
  return STICKY_CUDA_ERRORS.has(code);
}

/** Builds the error object for a failed library call (the native addon calls this; tests call it directly). */
export function makeCudaError(library: CudaLibrary, func: string, code: number, codeName: string, description: string): CudaError {
  const head = `${func} failed: ${codeName} (${code}): ${description}`;
  if (library === 'cuda' && isStickyCudaError(code)) {
    return new CudaFatalError(
      `${head} -- a sticky CUDA error: the CUDA context is lost and every later CUDA call in this process will fail; ` +
        'restart the process (run untrusted kernels in a child process)',
      library,
      func,
      code,
      codeName,
    );
  }
  if (library === 'cuda' && CAPTURE_ERRORS.has(code)) {
    return new CudaError(`${head} -- not allowed during CUDA graph capture (a host sync, a fresh allocation or a legacy-stream call inside capture?)`, library, func, code, codeName);
  }
  return new CudaError(head, library, func, code, codeName);
}
