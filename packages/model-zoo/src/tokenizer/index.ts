export * from './tokenizer.js';
export * from './chat-template.js';
export * from './detokenizer.js';
export * from './stop-strings.js';
