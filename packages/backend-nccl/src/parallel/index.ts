export { TensorParallelGroup, currentTensorParallelGroup, setTensorParallelGroup, withTensorParallelGroup, divide } from './group.js';
export { AllReduce, ColumnParallelLinear, MergedColumnParallelLinear, QKVParallelLinear, RowParallelLinear } from './linear.js';
export {
  cat,
  mergeColumnParallel,
  mergeMergedColumn,
  mergeQkv,
  mergeRowParallel,
  qkvLayout,
  shardColumnParallel,
  shardDim,
  shardMergedColumn,
  shardQkv,
  shardRowParallel,
  takeSlice,
  type QkvLayout,
} from './sharding.js';
export { HostCollectives } from './host-collectives.js';
