export * from './range';
export * from './select';
