export * from './cost';
export * from './weigh';
