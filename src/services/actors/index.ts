export * from './engine-services';

