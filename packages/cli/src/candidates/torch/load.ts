/**
 * Loads a PyTorch candidate (`L<k>/<stem>.py`, the original FastKernels / KernelBench format): finds a Python with
 * torch, starts the candidate's worker (which imports the file and finds the class), checks the class's Python
 * signature against the task's, and returns the Module class that runs it (module.ts). Every failure is a UserError
 * naming the .py file and, where there is one, the line.
 */
import { UserError, expectedSignature, formatConstructor, formatForward, type CandidateFile, type ModuleClass, type TaskDefinition } from '@fastkernels/core';
import { snake } from '../stubs/torch.js';
import { TorchWorkerProcess, type PySignature, type WorkerHello } from './channel.js';
import { torchCandidateClass } from './module.js';
import { torchPython } from './python.js';

/** A PyTorch candidate that patched the worker's clock or checks while it was imported: REWARD_HACK at import. */
export class TorchImportHackError extends UserError {}

export interface TorchLoadOptions {
  /** The environment to find Python in (default: process.env). */
  readonly env?: NodeJS.ProcessEnv;
  /** Seconds the worker may take to import torch and the candidate (default 600). */
  readonly readyTimeoutMs?: number;
}

const pyInit = (task: TaskDefinition) => `__init__(self, ${task.init.map((p) => (p.optional ? `${snake(p.name)}=...` : snake(p.name))).join(', ')})`;
const pyForward = (task: TaskDefinition) => `forward(self, ${[...task.inputs.map((s) => (s.optional ? `${s.name}=None` : s.name)), ...task.hostInputs.map((h) => `${h.name}=None`)].join(', ')})`;

function notReady(h: WorkerHello, file: CandidateFile, python: string, stderr: string): UserError {
  const err = h.error;
  const at = err?.line ? `${err.file ?? file.relPath}:${err.line}: ` : '';
  switch (h.kind) {
    case 'no_torch':
      return new UserError(`PyTorch candidates need torch: ${h.message} (${python})`, {
        file: file.relPath,
        field: 'FASTKERNELS_PYTHON',
        fix: `install torch for ${python} (\`${python} -m pip install torch\`), or set FASTKERNELS_PYTHON to a Python that has it`,
      });
    case 'import':
      return new UserError(`failed to import: ${at}${err?.message ?? 'unknown error'}`, {
        file: file.relPath,
        fix: 'fix the error at that line; the file is imported as a module (relative helpers may sit beside it, named _*.py)',
      });
    case 'no_class':
      return new UserError(`${at}${err?.message ?? 'no candidate class'}`, { file: file.relPath, fix: 'define the class as `class <Name>(torch.nn.Module)` with the baseline\'s name (`fastkernels stubs --lang torch` writes one)' });
    case 'hack':
      return new TorchImportHackError(err?.message ?? 'tampered with the worker at import', { file: file.relPath });
    default:
      return new UserError(`cannot start the PyTorch worker: ${h.message ?? 'no reason given'}${stderr ? ` (${stderr.trim().split('\n').slice(-3).join(' | ')})` : ''}`, {
        file: file.relPath,
        field: 'FASTKERNELS_PYTHON',
        fix: 'check that FASTKERNELS_PYTHON (or python3) runs, and that `python3 -c "import torch"` works there',
      });
  }
}

/** Whether a Python signature accepts between `required` and `declared` positional arguments. */
function accepts(s: PySignature, required: number, declared: number): boolean {
  return s.required <= required && (s.varargs || s.names.length >= declared);
}

export async function loadTorchCandidate(file: CandidateFile, task: TaskDefinition, options: TorchLoadOptions = {}): Promise<ModuleClass> {
  const py = torchPython(options.env ?? process.env, file.relPath);
  const { worker, hello, stderr } = await TorchWorkerProcess.start({
    python: py.command, file: file.path, display: file.relPath, className: task.className, env: options.env, readyTimeoutMs: options.readyTimeoutMs,
  });
  if (!worker) throw notReady(hello, file, py.python, stderr);
  const sig = expectedSignature(task);
  const at = hello.line ? `${file.relPath}:${hello.line}: ` : '';
  const fail = (what: string, fix: string): never => {
    worker.close();
    throw new UserError(`${at}${what}`, { file: file.relPath, fix });
  };
  if (hello.init && !accepts(hello.init, sig.requiredInit, sig.initParams.length)) {
    fail(`class ${task.className}: __init__ takes ${describe(hello.init)}, the baseline ${formatConstructor(task)} takes ${sig.requiredInit === sig.initParams.length ? sig.initParams.length : `${sig.requiredInit} to ${sig.initParams.length}`}`, `declare ${pyInit(task)}`);
  }
  if (hello.forward && !accepts(hello.forward, sig.requiredForward, sig.forwardParams.length)) {
    fail(`class ${task.className}: forward takes ${describe(hello.forward)}, the task passes ${formatForward(task)}`, `declare ${pyForward(task)} (optional inputs default to None)`);
  }
  return torchCandidateClass(task, worker);
}

function describe(s: PySignature): string {
  const n = s.names.length;
  return `${s.varargs ? `${n}+` : n === s.required ? n : `${s.required} to ${n}`} argument${n === 1 && !s.varargs ? '' : 's'} (${s.names.join(', ')}${s.varargs ? ', *args' : ''})`;
}
