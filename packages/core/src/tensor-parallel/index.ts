export * from './group.js';
export * from './shards.js';
