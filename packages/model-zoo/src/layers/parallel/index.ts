/** vLLM's tensor-parallel layers over core's TensorParallelGroup (the group and its collectives come from @fastkernels/core). */
export { AllReduce, ColumnParallelLinear, MergedColumnParallelLinear, QKVParallelLinear, RowParallelLinear } from './linear.js';
export {
  cat,
  mergeColumnParallel,
  mergeMergedColumn,
  mergeQkv,
  mergeRowParallel,
  shardColumnParallel,
  shardDim,
  shardMergedColumn,
  shardQkv,
  shardRowParallel,
  takeSlice,
} from './sharding.js';
export { checkExpertParallel, currentExpertParallel, expertParallelRange, setExpertParallel, withExpertParallel } from './expert-parallel.js';
