export * from './bracket';
export * from './request';
export * from './span';
export * from './truncation';
