export * from './bench.js';
export * from './summary.js';
export * from './report.js';
export * from './candidates.js';
