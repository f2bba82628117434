export * from './classify';
export * from './openai-client';
