export * from './arguments';
export * from './pruner';
export * from './step';
export * from './text';
export * from './fit';
