export * from './openai-compatible/openai-compatible.provider';
export {
  AnthropicProvider,
  toAnthropicMessages,
  type AnthropicProviderOptions,
} from './anthropic/anthropic.provider';
export * from './demo/demo.provider';
export { ProviderError, type ProviderErrorKind, type ProviderErrorOptions } from './provider-error';
export * from './provider-factory';
export {
  backoffDelay,
  parseRetryAfter,
  type ResilienceOptions,
  type RetryInfo,
  type RetryOptions,
} from './retry';
export * from './model.registry';
