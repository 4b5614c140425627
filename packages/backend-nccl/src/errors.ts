/** Errors of the NCCL backend: a failing NCCL call, a wait that ran past its deadline, a communicator used after abort. */

/** A failing NCCL call: `func` (ncclAllReduce, ...), the result `code` and its name, NCCL's last-error text. */
export class NcclError extends Error {
  override readonly name: string = 'NcclError';
  constructor(
    readonly func: string,
    readonly code: number,
    readonly codeName: string,
    readonly description: string,
    readonly lastError = '',
    context = '',
  ) {
    super(`${context ? context + ': ' : ''}${func} failed: ${codeName} (${code}): ${description}${lastError ? ` (NCCL: ${lastError.trim()})` : ''}`);
  }
}

/** A wait (init, a collective, a stream sync) that passed its deadline; the communicator was aborted. */
export class NcclTimeoutError extends Error {
  override readonly name: string = 'NcclTimeoutError';
  constructor(
    readonly operation: string,
    readonly timeoutMs: number,
    readonly rank: number,
    readonly world: number,
  ) {
    super(
      `${operation} on rank ${rank} of ${world} did not complete within ${(timeoutMs / 1000).toFixed(1)} s: a peer rank stopped, ` +
        'hung or never joined; the communicator was aborted (set FASTKERNELS_NCCL_TIMEOUT_MS to wait longer)',
    );
  }
}

/** The error the addon's factory builds for a failing NCCL call. */
export function makeNcclError(lib: string, fn: string, code: number, name: string, desc: string, lastError: string): Error {
  return new NcclError(fn, code, name, desc, lastError);
}
