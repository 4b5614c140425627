/** The generated worker-source.generated.ts text for python/fk_torch_worker.py (scripts/embed-torch-worker.mjs). */
export function renderTorchWorkerSource(file?: string): string;
