/**
 * The tensor-parallel group the layers use. It is defined in @fastkernels/core (model-zoo reads it too, and model-zoo
 * does not import this package); re-exported here so the layers' API stays in one place.
 */
export { TensorParallelGroup, currentTensorParallelGroup, divide, setTensorParallelGroup, withTensorParallelGroup } from '@fastkernels/core';
