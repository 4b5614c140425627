// The triton-demo RMSNorm on its own, for running a Triton kernel inside a model end to end (issue 9):
// `fastkernels e2e --backend cuda --candidates examples/candidates/triton-rmsnorm` swaps it into every
// decoder layer, including the CUDA-graph-captured decode steps.
export { RMSNorm } from '../../triton-demo/L1/rms_norm.ts';
