import type { LlmProvider } from '../contracts';
import { AnthropicProvider } from './anthropic/anthropic.provider';
import { DemoProvider } from './demo/demo.provider';
import { OpenAiCompatibleProvider } from './openai-compatible/openai-compatible.provider';
import type { ResilienceOptions } from './retry';

/** The model endpoint settings of the environment (`LLM_BASE_URL`, `LLM_API_KEY`, `LLM_MODEL`). */
export interface ProviderEnv {
  /** `LLM_BASE_URL`; the offline demo model when absent or blank. */
  baseURL?: string;
  /** `LLM_API_KEY`. */
  apiKey?: string;
  /** `LLM_MODEL`. */
  model?: string;
  /** Wire format; by default Anthropic for `*.anthropic.com` hosts, else OpenAI-compatible. */
  kind?: 'openai' | 'anthropic';
}

/** Default model of an OpenAI-compatible endpoint when `LLM_MODEL` is unset. */
export const DEFAULT_OPENAI_MODEL = 'gpt-4o-mini';
/** Default model of the Anthropic API when `LLM_MODEL` is unset. */
export const DEFAULT_ANTHROPIC_MODEL = 'claude-sonnet-4-6';

/** Whether a base URL points at Anthropic's API. */
function isAnthropicHost(baseURL: string): boolean {
  try {
    const host = new URL(baseURL).hostname.toLowerCase();
    return host === 'anthropic.com' || host.endsWith('.anthropic.com');
  } catch {
    return false;
  }
}

/**
 * The model provider for the environment: the OpenAI-compatible provider for `LLM_BASE_URL`,
 * the Anthropic provider when `kind` says so or the host is `api.anthropic.com`, and the
 * built-in offline {@link DemoProvider} when no base URL is set. `options` tunes timeouts and
 * retries of the real providers.
 */
export function createProviderFromEnv(
  env: ProviderEnv,
  options: ResilienceOptions = {},
): LlmProvider {
  const baseURL = env.baseURL?.trim();
  if (!baseURL) return new DemoProvider();
  const apiKey = env.apiKey?.trim() || undefined;
  const model = env.model?.trim() || undefined;
  if (env.kind === 'anthropic' || (env.kind === undefined && isAnthropicHost(baseURL))) {
    return new AnthropicProvider({
      ...options,
      baseURL,
      apiKey,
      defaultModel: model ?? DEFAULT_ANTHROPIC_MODEL,
    });
  }
  return new OpenAiCompatibleProvider({
    ...options,
    baseURL,
    apiKey,
    defaultModel: model ?? DEFAULT_OPENAI_MODEL,
  });
}

/** One line for the start-up log naming the model provider in use. */
export function describeProvider(provider: LlmProvider): string {
  const model = provider.defaultModel ? `, model ${provider.defaultModel}` : '';
  if (provider instanceof DemoProvider) {
    return 'Model provider: the built-in OFFLINE DEMO model (replies start with "[demo model]"; it echoes and tells the time with the clock tool): set LLM_BASE_URL (and LLM_API_KEY, LLM_MODEL) to use a real model';
  }
  if (provider instanceof AnthropicProvider) {
    return `Model provider: Anthropic Messages API endpoint ${provider.endpoint} (id ${provider.id}${model})`;
  }
  if (provider instanceof OpenAiCompatibleProvider) {
    return `Model provider: OpenAI-compatible endpoint ${provider.endpoint} (id ${provider.id}${model})`;
  }
  return `Model provider: ${provider.id}${provider.defaultModel ? ` (model ${provider.defaultModel})` : ''}`;
}
