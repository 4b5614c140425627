import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  UserError,
  errorMessage,
  isHelperName,
  parseCandidatePath,
  unknownTaskError,
  validateCandidateExports,
  type CandidateFile,
  type CandidateLoadFailure,
  type CandidateLoader,
  type CandidateSet,
  type LoadedCandidate,
  type TaskDefinition,
} from '@fastkernels/core';
import { loadCudaCandidate, type CudaLoadOptions } from './cuda/load.js';
import { loadTorchCandidate } from './torch/load.js';
import { SDK_GLOBAL, installSdk, type Sdk } from './sdk.js';

/**
 * Loads a candidate folder: each `L<k>/<stem>.ts|.js` is bundled by esbuild (TypeScript is
 * transpiled, relative imports are inlined, '@fastkernels/*' imports are mapped to the running CLI's
 * own packages; `.cu`, `.cuh` and `.py` imports are their text), written to a temp file and imported;
 * each `L<k>/<stem>.cu` is bound by its manifest (cuda/load.ts); each `L<k>/<stem>.py` is a PyTorch candidate in the
 * original's format, run by a Python worker (torch/load.ts). Every file is validated against its task.
 */
export class EsbuildCandidateLoader implements CandidateLoader {
  constructor(
    private readonly options: {
      filter?: (f: CandidateFile) => boolean;
      /** The backend the candidates will run on (CUDA C++ candidates compile now on 'cuda'; see CudaLoadOptions). */
      backend?: string;
      /** Compile CUDA C++ candidates with this instead of the CUDA runtime (tests). */
      compileCuda?: CudaLoadOptions['compile'];
    } = {},
  ) {}

  async load(dir: string, tasks: ReadonlyMap<string, TaskDefinition>): Promise<CandidateSet> {
    const files = listCandidateFiles(dir).filter((f) => this.options.filter?.(f) ?? true);
    const sdk = installSdk();
    const tmp = mkdtempSync(join(tmpdir(), 'fastkernels-candidates-'));
    const candidates: LoadedCandidate[] = [];
    const failures: CandidateLoadFailure[] = [];
    try {
      for (const [i, file] of files.entries()) {
        const task = tasks.get(file.taskId);
        if (!task) {
          failures.push({ file, error: unknownTaskError(file, tasks.keys()) });
          continue;
        }
        try {
          if (file.path.endsWith('.cu')) {
            const cls = await loadCudaCandidate(file, task, { backend: this.options.backend, compile: this.options.compileCuda }).catch((e: unknown) => {
              // bench reports a failure under the candidate's .cu: say when it is in the binding (or another file)
              const other = e instanceof UserError && e.details.file && e.details.file !== file.relPath && !e.message.includes(e.details.file);
              throw other ? new UserError(`${basename(e.details.file!)}: ${e.message}`, e.details) : e;
            });
            candidates.push({ file, task, cls: validateCandidateExports(file, task, { [task.className]: cls }) });
            continue;
          }
          if (file.path.endsWith('.py')) {
            const cls = await loadTorchCandidate(file, task);
            candidates.push({ file, task, cls: validateCandidateExports(file, task, { [task.className]: cls }) });
            continue;
          }
          const exports = await importCandidate(file, sdk, join(tmp, `${i}-${file.level}-${file.stem}.mjs`));
          const named = exports[task.className] ?? (isNamedClass(exports.default, task.className) ? exports.default : undefined);
          const cls = validateCandidateExports(file, task, named === undefined ? exports : { ...exports, [task.className]: named });
          candidates.push({ file, task, cls });
        } catch (e) {
          failures.push({ file, error: e instanceof UserError ? e : new UserError(`failed to load: ${errorMessage(e)}`, { file: file.relPath }) });
        }
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
    return { dir, candidates, failures };
  }
}

function isNamedClass(x: unknown, name: string): boolean {
  return typeof x === 'function' && x.name === name;
}

/** The candidate files of a folder (sorted), or a UserError when the folder cannot be read. */
export function listCandidateFiles(dir: string): CandidateFile[] {
  const root = resolve(dir);
  let st;
  try {
    st = statSync(root);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new UserError(code === 'ENOENT' ? 'no such folder' : `cannot read the folder (${code ?? errorMessage(e)})`, {
      file: dir,
      field: '--candidates',
      fix: 'pass a folder that holds L1/<task>.ts files (`fastkernels stubs --out DIR` writes skeletons)',
    });
  }
  if (!st.isDirectory()) {
    throw new UserError('is a file, not a folder', { file: dir, field: '--candidates', fix: 'pass the folder that holds L1/<task>.ts files' });
  }
  const out: CandidateFile[] = [];
  const walk = (abs: string, depth: number) => {
    let entries;
    try {
      entries = readdirSync(abs, { withFileTypes: true });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      throw new UserError(`cannot read the folder (${code ?? errorMessage(e)})`, {
        file: relative(process.cwd(), abs) || abs,
        field: '--candidates',
        fix: code === 'EACCES' ? 'make it readable (chmod u+rx) or pass another folder' : 'pass a readable folder',
      });
    }
    for (const ent of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      if (isHelperName(ent.name)) continue;
      const path = join(abs, ent.name);
      const rel = relative(root, path).split(sep).join('/');
      if (ent.isDirectory()) {
        if (depth === 0 && /^L[1-9]$/.test(ent.name)) walk(path, 1);
        continue;
      }
      if (depth !== 1 || !/\.(ts|mts|js|mjs|cu|py)$/.test(ent.name)) continue;
      // A .cu or .py beside a class of the same stem is that class's kernel source (imported as text), not a candidate.
      if (/\.(cu|py)$/.test(ent.name) && entries.some((e) => /\.(ts|mts|js|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts') && e.name.replace(/\.\w+$/, '') === ent.name.replace(/\.\w+$/, ''))) continue;
      const parsed = parseCandidatePath(rel);
      if (!parsed) {
        throw new UserError('is not a candidate file name', {
          file: join(dir, rel),
          fix: 'name candidate files L<level>/<task stem>.ts, e.g. L1/rms_norm.ts (prefix helper files with _)',
        });
      }
      out.push({ path, relPath: join(dir, rel), level: parsed.level, stem: parsed.stem, taskId: `L${parsed.level}/${parsed.stem}` });
    }
  };
  walk(root, 0);
  return out;
}

interface EsbuildMessage {
  text: string;
  location?: { file: string; line: number; column: number; lineText?: string } | null;
}

let esbuildModule: Promise<typeof import('esbuild')> | undefined;
function loadEsbuild(): Promise<typeof import('esbuild')> {
  return (esbuildModule ??= import('esbuild').catch((e: unknown) => {
    throw new UserError(`esbuild is not available to transpile candidates (${errorMessage(e)})`, { fix: 'run fastkernels from an installed checkout (npm ci) so esbuild is present' });
  }));
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** A module that re-exports one of the running CLI's packages from the SDK global. */
function sdkModuleSource(pkg: string, ns: Readonly<Record<string, unknown>>): string {
  const names = Object.keys(ns).filter((k) => IDENT.test(k) && k !== 'default');
  const lines = [`const __ns = globalThis[Symbol.for(${JSON.stringify(SDK_GLOBAL.description)})][${JSON.stringify(pkg)}];`];
  for (const n of names) lines.push(`export const ${n} = __ns.${n};`);
  lines.push('export default __ns;');
  return lines.join('\n');
}

async function importCandidate(file: CandidateFile, sdk: Sdk, outFile: string): Promise<Record<string, unknown>> {
  const esbuild = await loadEsbuild();
  let code: string;
  try {
    const result = await esbuild.build({
      entryPoints: [file.path],
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      logLevel: 'silent',
      sourcemap: 'inline',
      tsconfigRaw: { compilerOptions: { useDefineForClassFields: false, experimentalDecorators: true } },
      // A candidate may keep its kernel in its own file: `import SOURCE from './rms_norm.cu'` gives the text.
      loader: { '.cu': 'text', '.cuh': 'text', '.py': 'text' },
      plugins: [
        {
          name: 'fastkernels-sdk',
          setup(build) {
            build.onResolve({ filter: /^@fastkernels\// }, (args) => {
              if (!(args.path in sdk)) {
                return { errors: [{ text: `cannot import '${args.path}': this CLI provides ${Object.keys(sdk).join(', ')}` }] };
              }
              return { path: args.path, namespace: 'fastkernels-sdk' };
            });
            build.onLoad({ filter: /.*/, namespace: 'fastkernels-sdk' }, (args) => ({ contents: sdkModuleSource(args.path, sdk[args.path]!), loader: 'js' }));
          },
        },
      ],
    });
    code = result.outputFiles[0]!.text;
  } catch (e) {
    const errors = (e as { errors?: EsbuildMessage[] }).errors;
    if (!errors?.length) throw new UserError(`failed to transpile: ${errorMessage(e)}`, { file: file.relPath });
    const first = errors[0]!;
    const loc = first.location ? `${first.location.file}:${first.location.line}:${first.location.column + 1}: ` : '';
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more error${errors.length > 2 ? 's' : ''})` : '';
    const parse = !/^cannot import|Could not resolve/.test(first.text);
    throw new UserError(`${parse ? 'does not parse' : 'cannot be bundled'}: ${loc}${first.text}${more}`, {
      file: file.relPath,
      fix: parse ? 'fix the syntax error at that line (the file is TypeScript or JavaScript, ES2022)' : 'import only relative files, npm packages and @fastkernels/core, backend-cpu, backend-cuda, backend-triton, backend-nccl, model-zoo',
    });
  }
  writeFileSync(outFile, code);
  try {
    return (await import(pathToFileURL(outFile).href)) as Record<string, unknown>;
  } catch (e) {
    throw new UserError(`threw while being imported: ${errorMessage(e)}`, { file: file.relPath, fix: 'keep top-level code free of side effects that can fail; do the work in the constructor or forward()' });
  }
}
