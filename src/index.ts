export { XcompactError } from './errors';
export * from './session/index';
