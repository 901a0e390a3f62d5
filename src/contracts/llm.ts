import type { ModelMessage, ToolCall } from './messages';
import type { ToolDefinition } from './tools';

/** Which model to use: a provider instance id (optional) and a model name. */
export interface ModelRef {
  provider?: string;
  model: string;
}

/** What a model can do; reported by its provider or overridden per model in options. */
export interface ModelCapabilities {
  /** Context window in tokens. */
  contextWindow: number;
  /** Maximum tokens of one reply; the budget reserves this much. */
  maxOutputTokens: number;
  /** Whether the model can see images (H2: `acceptsImages`). */
  vision: boolean;
  /** Whether the model accepts tool definitions. */
  tools: boolean;
  /** Whether the model supports a reasoning ("deep thinking") mode. */
  reasoning?: boolean;
  /** Token encoding (OpenAI's BPE names) used to estimate tokens for this model. */
  encoding?: 'o200k_base' | 'cl100k_base';
}

/** Token usage reported by a provider for one call. */
export interface ProviderUsage {
  promptTokens?: number;
  completionTokens?: number;
  totalTokens?: number;
}

/** One model call. */
export interface ChatRequest {
  model: string;
  messages: ModelMessage[];
  tools?: ToolDefinition[];
  maxTokens?: number;
  /** Deep thinking (C1). */
  think?: boolean;
  /**
   * The model's capabilities as the agent resolved them (the provider's report merged with
   * operator overrides); providers use them over their own defaults when given.
   */
  capabilities?: ModelCapabilities;
  /**
   * Longest silence of the model, in milliseconds, before the first byte and between chunks;
   * the attempts before the first token share twice this in total. Overrides the provider's
   * own setting when given (the agent passes its `llmIdleTimeoutMs`).
   */
  idleTimeoutMs?: number;
  signal: AbortSignal;
}

/** One streamed piece of a model answer. */
export interface ChatStreamChunk {
  contentDelta?: string;
  reasoningDelta?: string;
  /** Completed tool calls; may arrive on any chunk, the last non-empty list wins. */
  toolCalls?: ToolCall[];
  usage?: ProviderUsage;
  /** The model that answered, as the provider named it (may differ from the one asked). */
  responseModel?: string;
  /** Why the model stopped (`stop`, `tool_calls`, `length`, `end_turn`, ...), as reported. */
  finishReason?: string;
}

/** A whole model answer. */
export interface ChatResponse {
  content: string;
  reasoningContent?: string;
  toolCalls?: ToolCall[];
  usage?: ProviderUsage;
  /** The model that answered, when the provider said. */
  responseModel?: string;
  /** Why the model stopped, when the provider said. */
  finishReason?: string;
}

/**
 * The model provider port. A provider serves one or more models; the agent streams through
 * `stream` when present, else calls `chat` once and sends the whole answer as one chunk (I16).
 */
export interface LlmProvider {
  /** Provider instance id (`ModelRef.provider`). */
  readonly id: string;
  /** Default model name when a `ModelRef` names none. */
  readonly defaultModel?: string;
  /** Capabilities of a model, or `undefined` when this provider does not serve it. */
  capabilities(model: string): ModelCapabilities | undefined;
  chat(request: ChatRequest): Promise<ChatResponse>;
  stream?(request: ChatRequest): AsyncIterable<ChatStreamChunk>;
  /** Readiness probe for `/health`; throws when the provider cannot be reached. */
  ping?(): Promise<void>;
}

/** Injection token of the default model provider. */
export const LlmProvider = Symbol.for('agent:LlmProvider');
