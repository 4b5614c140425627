/** A small torch.nn mirror (growth.md §2): PyTorch's constructor arguments and parameter names, forward through F. */
export * from './linear.js';
export * from './conv.js';
export * from './norm.js';
export * from './embedding.js';
export * from './activation.js';
export * from './dropout.js';
export * from './pooling.js';
export * from './container.js';
export * from './registry.js';
export * from './weight-rules.js';
