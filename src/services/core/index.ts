export * from './compaction-error';
export * from './contracts';
export * from './deps';
export * from './route';
export * from './tokenizers';
export * from './writer-prices';
