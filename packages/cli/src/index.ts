export { main, buildApp } from './app.js';
export { EXIT_OK, EXIT_INTERNAL, EXIT_USAGE } from './exit-codes.js';
export { EsbuildCandidateLoader, listCandidateFiles } from './candidates/loader.js';
export { installSdk, SDK_GLOBAL } from './candidates/sdk.js';
export { stubSource } from './commands/stubs.js';
export { runBench } from './commands/bench.js';
