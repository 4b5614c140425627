/**
 * Load a checkpoint folder (model.safetensors, shards by model.safetensors.index.json, or every *.safetensors) into a
 * built module tree, by the tree's parameter names (planWeights). Everything is checked before anything is written,
 * and every problem is reported at once: missing tensors, tensors of the wrong shape or a non-float dtype, tensors the
 * model does not use. Each tensor's bytes are then streamed from the file into its rows of the parameter (directly
 * when the dtypes match, else through a staging tensor of the file's dtype and a device-side conversion); a
 * tensor-parallel rank reads only its slice.
 */
import { DTYPE_INFO, Tensor, UserError, currentTensorParallelGroup, formatShape, numel, shapesEqual, type DType, type Module } from '@fastkernels/core';
import { Checkpoint } from './safetensors.js';
import { loadableParameters, mappedShape, planWeights, rowElements, type TensorParallelRank, type WeightMapping, type WeightRules } from './weight-plan.js';
import { currentExpertParallel } from '../layers/parallel/expert-parallel.js';

/**
 * Each mapping's values must land inside its parameter with the parameter's trailing dims, and the mappings of a
 * parameter must fill it (a module that splits itself otherwise than the rules say would be written out of bounds, or
 * keep rows it never loaded). A programming error of a family or a candidate, not of the user: Error.
 */
export function checkPlanFits(plan: readonly WeightMapping[], params: ReadonlyMap<string, Tensor>): void {
  const filled = new Map<string, number>();
  for (const m of plan) {
    const param = params.get(m.target);
    if (!param) throw new Error(`weight plan targets '${m.target}', which the model does not have`);
    const shape = mappedShape(m);
    const inner = shape.slice(1);
    const paramInner = param.shape.slice(param.shape.length - inner.length);
    const end = (m.rowOffset + (shape[0] ?? 1)) * rowElements(shape);
    if (!shapesEqual(inner, paramInner) || end > param.numel) {
      throw new Error(`'${m.hfName}': ${formatShape(shape)} at row ${m.rowOffset} does not fit ${m.target} ${formatShape(param.shape)} (the module splits itself otherwise than the weight rules say?)`);
    }
    filled.set(m.target, (filled.get(m.target) ?? 0) + numel(shape));
  }
  for (const [k, p] of params) {
    const n = filled.get(k) ?? 0;
    if (n !== p.numel) throw new Error(`weight plan fills ${n} of the ${p.numel} values of '${k}' ${formatShape(p.shape)} (a candidate with other parameter names, or a missing stacked part?)`);
  }
}

/** A contiguous flat window of a parameter where a mapping's values go, shaped as the values. */
export function targetRows(param: Tensor, m: WeightMapping): Tensor {
  if (!param.isContiguous()) throw new Error(`parameter ${m.target} is not contiguous`);
  const shape = mappedShape(m);
  const flat = param.view([param.numel]);
  const window = flat.narrow(0, m.rowOffset * rowElements(shape), numel(shape));
  const out = window.view(shape);
  window.dispose();
  flat.dispose();
  return out;
}

/** One disagreement: its line in a list of several, and the sentence that says it alone. */
interface Problem {
  readonly kind: 'missing' | 'shape' | 'dtype' | 'unexpected';
  readonly name: string;
  readonly line: string;
  readonly single: string;
}

/**
 * Every way the checkpoint disagrees with the plan. A float parameter reads any float tensor (converted); an integer
 * parameter (MXFP4 blocks / scales) reads a tensor of its own dtype, bit-exact.
 */
function findProblems(ckpt: Checkpoint, plan: readonly WeightMapping[], rules: WeightRules, params: ReadonlyMap<string, Tensor>, expertParallel = false): Problem[] {
  const problems: Problem[] = [];
  const seen = new Set<string>();
  for (const m of plan) {
    if (seen.has(m.hfName)) continue;
    seen.add(m.hfName);
    if (!ckpt.has(m.hfName)) {
      const what = `tensor '${m.hfName}' (${formatShape(m.shape)}, for ${m.target})`;
      problems.push({ kind: 'missing', name: m.hfName, line: `missing ${what}`, single: `checkpoint ${ckpt.dir} is missing ${what}` });
      continue;
    }
    const info = ckpt.info(m.hfName);
    if (!shapesEqual(info.shape, m.shape)) {
      const s = `tensor '${m.hfName}' in ${info.file} has shape ${formatShape(info.shape)}, expected ${formatShape(m.shape)} from the config`;
      problems.push({ kind: 'shape', name: m.hfName, line: s, single: s });
    } else if (!info.dtype || !dtypeLoadsInto(info.dtype, params.get(m.target)?.dtype)) {
      const want = params.get(m.target)?.dtype;
      const expected = want && DTYPE_INFO[want].kind !== 'float' ? `${want.toUpperCase()} (read bit-exact)` : 'a float dtype (BF16, F16, F32)';
      const s = `tensor '${m.hfName}' in ${info.file} has dtype ${info.stDType}, expected ${expected}`;
      problems.push({ kind: 'dtype', name: m.hfName, line: s, single: s });
    }
  }
  const tiedAway = new Set(Object.keys(rules.tied ?? {}));
  // expert parallelism: another expert of a tensor this rank reads some experts of is another rank's, not unexpected
  const expertPattern = (n: string) => n.replace(/\.experts\.\d+\./, '.experts.*.');
  const otherRanks = new Set([...seen].filter((n) => /\.experts\.\d+\./.test(n)).map(expertPattern));
  const unexpected = ckpt.names().filter((n) => !seen.has(n) && !tiedAway.has(n) && !(rules.ignore ?? []).some((r) => r.test(n)) && !(expertParallel && otherRanks.has(expertPattern(n))));
  if (unexpected.length) {
    const list = unexpected.map((n) => `'${n}'`).join(', ');
    problems.push({ kind: 'unexpected', name: unexpected[0]!, line: `unused by the model: ${list}`, single: `checkpoint ${ckpt.dir} has tensors the ${rules.label} does not use: ${list}` });
  }
  return problems;
}

const dtypeLoadsInto = (have: DType, want: DType | undefined): boolean =>
  want && DTYPE_INFO[want].kind !== 'float' ? have === want : DTYPE_INFO[have].kind === 'float';

/** One UserError for all the problems: the old single sentence when there is one, else a list. */
function problemsError(dir: string, problems: readonly Problem[], rules: WeightRules): UserError {
  const fixes = new Set<string>();
  for (const p of problems) {
    if (p.kind === 'missing') fixes.add(rules.missingFix?.(p.name) ?? 'check the checkpoint matches config.json');
    else if (p.kind === 'unexpected') fixes.add(rules.unexpectedFix ?? 'check config.json matches the checkpoint (number of layers, biases, tied embeddings)');
    else fixes.add('check the checkpoint matches config.json');
  }
  const fix = [...fixes].join('; ');
  if (problems.length === 1) return new UserError(problems[0]!.single, { field: problems[0]!.name, fix });
  const lines = problems.map((p) => `  ${p.line}`);
  return new UserError(`checkpoint ${dir} does not match the ${rules.label} (${problems.length} problems):\n${lines.join('\n')}`, { field: problems[0]!.name, fix });
}

/**
 * Load a checkpoint folder into a built module tree. The plan comes from the tree's parameters and the family's
 * rules; under tensor parallelism (a group of world > 1 current) each tensor is read as this rank's slice only.
 */
export function loadWeights(model: Module, rules: WeightRules, dir: string, tp: TensorParallelRank = currentTensorParallelGroup()): void {
  const params = loadableParameters(model, rules);
  const plan = planWeights(model, rules, tp);
  checkPlanFits(plan, params);
  const ckpt = Checkpoint.open(dir);
  try {
    const problems = findProblems(ckpt, plan, rules, params, tp.world > 1 && currentExpertParallel());
    if (problems.length) throw problemsError(dir, problems, rules);
    for (const m of plan) {
      const param = params.get(m.target)!;
      const info = ckpt.info(m.hfName);
      const file = ckpt.file(m.hfName);
      const dst = targetRows(param, m);
      const read = (t: Tensor) => (m.slice ? file.readSliceInto(m.hfName, m.slice, t.backend, t.storage, t.offset * t.itemsize) : file.readInto(m.hfName, t.backend, t.storage, t.offset * t.itemsize));
      try {
        if (info.dtype === param.dtype) read(dst);
        else {
          const staged = Tensor.empty(param.backend, dst.shape, info.dtype!, { device: param.device });
          read(staged);
          dst.copy_(staged);
          staged.dispose();
        }
      } finally {
        dst.dispose();
      }
    }
  } finally {
    ckpt.close();
  }
}
