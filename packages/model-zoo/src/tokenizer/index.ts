export * from './tokenizer.js';
export * from './chat-template.js';
export * from './detokenizer.js';
export * from './stop-strings.js';
export * from './clip-slow.js';
