/**
 * A backend that holds no memory (PyTorch's "meta" device): a module tree built on it has every parameter's name,
 * shape and dtype and no values. Writing a checkpoint from a config (init-weights) enumerates the model's parameters
 * this way, so a Llama-3-8B layout costs nothing to build; the same enumeration then drives loading and random init.
 * Writes are dropped, and any op other than fill (parameters are zero-filled at creation) is an error.
 */
import type { Backend, Storage } from '@fastkernels/core';

class MetaStorage implements Storage {
  released = false;
  private refs = 1;
  constructor(
    readonly backend: Backend,
    readonly device: number,
    readonly byteLength: number,
  ) {}
  retain(): void {
    this.refs++;
  }
  release(): void {
    if (--this.refs <= 0) this.released = true;
  }
}

function noValues(what: string): never {
  throw new Error(`the meta backend holds no values: ${what} cannot run on it (it only enumerates parameters)`);
}

export function metaBackend(): Backend {
  const ops = new Proxy({} as Backend['ops'], {
    get: (_t, name) => (name === 'fill' ? () => {} : typeof name === 'string' ? () => noValues(`op ${name}`) : undefined),
  });
  const backend: Backend = {
    name: 'meta',
    availability: () => ({ available: true }),
    devices: () => [],
    capabilities: { graphs: false, collectives: false, kernelLanguages: [] },
    ops,
    allocate: (byteLength, device) => new MetaStorage(backend, device, byteLength),
    write: () => {},
    read: () => noValues('read'),
    copyBytes: () => {},
    synchronize: () => {},
    createTimer: () => noValues('createTimer'),
    versions: () => ({}),
  };
  return backend;
}
