export * from './openai-compatible/openai-compatible.provider';
export * from './model.registry';
