import type AnthropicClient from '@anthropic-ai/sdk';
import type {
  MessageCreateParamsNonStreaming,
  MessageCreateParamsStreaming,
} from '@anthropic-ai/sdk/resources/messages';
import type {
  ChatRequest,
  ChatResponse,
  ChatStreamChunk,
  LlmProvider,
  ModelCapabilities,
} from '../../contracts';
import { CallBudget, CallSignal } from '../call-signal';
import { safeFetch, safeFetchOf } from '../fetch';
import {
  endpointLabel,
  ProviderError,
  type ErrorContext,
  type SdkErrorClasses,
} from '../provider-error';
import { toProviderError } from '../provider-error.classification';
import { disconnected, stalled } from '../provider-error.sentences';
import {
  DEFAULT_TIMEOUT_MS,
  idleTimeoutOf,
  policyOf,
  retryCall,
  retryStream,
  type ResilienceOptions,
  type RetryControl,
  type RetryPolicy,
} from '../retry';
import { answerEvents } from './anthropic.answer';
import { readMessage, toWireParams, type WireParams } from './anthropic.mapping';
import { loadAnthropicSdk, type AnthropicSdk } from './anthropic.sdk';
import { MessageStreamReader, UsageTracker } from './anthropic.stream';
import { ThinkingCache } from './anthropic.thinking';

export { toAnthropicMessages } from './anthropic.mapping';

/** Options of an {@link AnthropicProvider}. */
export interface AnthropicProviderOptions extends ResilienceOptions {
  /** Provider instance id (`ModelRef.provider`). @default 'anthropic' */
  id?: string;
  /** API root; a trailing `/v1` is dropped (the SDK adds it). @default 'https://api.anthropic.com' */
  baseURL?: string;
  /** API key (the SDK sends it as its version requires). @default 'not-needed' (local servers) */
  apiKey?: string;
  /** Model used when a `ModelRef` names none. */
  defaultModel?: string;
  /** Capability overrides per exact model name, merged over `defaultCapabilities`. */
  capabilities?: Record<string, Partial<ModelCapabilities>>;
  /** Capability overrides for every model, merged over the built-in defaults. */
  defaultCapabilities?: Partial<ModelCapabilities>;
  /**
   * Thinking budget when `think` is on: at most this many tokens, at least 1024, and always
   * below `max_tokens` (half of it by default). @default 16000
   */
  thinkingBudgetTokens?: number;
  /** Send `thinking: { type: 'adaptive' }` instead of a fixed budget (newer models). */
  adaptiveThinking?: boolean;
  /** The `fetch` to send requests with (a proxy-aware one, a test double). @default global fetch */
  fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
}

/** Milliseconds `ping()` waits for `GET /v1/models`. */
const PING_TIMEOUT_MS = 5000;
const DEFAULT_BASE_URL = 'https://api.anthropic.com';
/** Model names with extended thinking: Claude 3.7 and Claude 4 or later (`claude-<family>-4...`). */
const REASONING_MODEL = /claude-(?:3-7|[a-z]+-[4-9]|[4-9](?:[-.]|$))/i;

/**
 * A model provider for the Anthropic Messages API (Claude), built on the official
 * `@anthropic-ai/sdk`, loaded when the provider is created. It serves any model name.
 *
 * Mapping: leading system messages become `system`; later ones (mid-conversation notes) are
 * sent in place as user text, since the Messages API has no system turns. Assistant tool calls
 * become `tool_use` blocks, tool results `tool_result` blocks of one user message, images
 * base64 or URL image blocks. `think` becomes `thinking` for models that support it; the
 * thinking blocks (with signatures) of a tool-use answer are kept and sent back with it, as the
 * API requires, while the tool loop lasts.
 *
 * Resilience and errors as in `OpenAiCompatibleProvider`: retries with backoff and jitter before
 * the first streamed chunk, never after; the idle timeout before the headers and between events
 * (`ping` events do not count), with twice that shared by the attempts before the first token;
 * a JSON message is taken as the answer, another content type fails naming it; failures are
 * one-sentence `ProviderError`s; an abort surfaces as the SDK's `APIUserAbortError`; each
 * attempt's abort controller is unlinked from the caller's signal when it ends.
 */
export class AnthropicProvider implements LlmProvider {
  /** Provider instance id. */
  readonly id: string;
  /** Default model name, if configured. */
  readonly defaultModel?: string;
  /** The API root as shown in logs and notices (no credentials, no query). */
  readonly endpoint: string;
  private readonly sdk: AnthropicSdk;
  private readonly client: AnthropicClient;
  private readonly policy: RetryPolicy;
  private readonly errors: SdkErrorClasses;
  /** Thinking blocks of recent tool-use answers, by the id of each of their tool calls. */
  private readonly thinkingCache = new ThinkingCache();

  constructor(private readonly options: AnthropicProviderOptions = {}) {
    this.id = options.id ?? 'anthropic';
    this.defaultModel = options.defaultModel;
    this.sdk = loadAnthropicSdk();
    const baseURL = (options.baseURL || DEFAULT_BASE_URL).replace(/\/+$/, '').replace(/\/v1$/, '');
    this.endpoint = endpointLabel(baseURL);
    this.policy = policyOf(options);
    this.errors = this.sdk;
    this.client = new this.sdk.Anthropic({
      baseURL,
      apiKey: options.apiKey || 'not-needed',
      maxRetries: 0,
      timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      fetch: options.fetch ? safeFetchOf(options.fetch) : safeFetch,
      // Failures reach the caller as one-sentence ProviderErrors.
      logLevel: 'off',
    });
  }

  /** Capabilities of `model`: built-in defaults, then `defaultCapabilities`, then per model. */
  capabilities(model: string): ModelCapabilities {
    return {
      contextWindow: 200_000,
      maxOutputTokens: 8192,
      vision: true,
      tools: true,
      reasoning: REASONING_MODEL.test(model),
      encoding: 'cl100k_base',
      ...this.options.defaultCapabilities,
      ...this.options.capabilities?.[model],
    };
  }

  /** One non-streaming call (retried as a whole on retryable errors). */
  async chat(request: ChatRequest): Promise<ChatResponse> {
    if (request.signal.aborted) throw new this.sdk.APIUserAbortError();
    const params = this.buildParams(request);
    const message: any = await retryCall(
      async () => {
        // No idle timeout: a whole answer comes at once, after all of its generation.
        const call = new CallSignal(request.signal, new CallBudget(0));
        try {
          return await this.client.messages.create(
            { ...params, stream: false } as unknown as MessageCreateParamsNonStreaming,
            { signal: call.signal },
          );
        } catch (error) {
          throw this.failure(request, error);
        } finally {
          call.end(true);
        }
      },
      this.policy,
      this.retryControl(request),
    );
    const { content, reasoning, toolCalls, thinking } = readMessage(message);
    this.thinkingCache.remember(toolCalls, thinking);
    const usage = new UsageTracker();
    usage.add(message?.usage);
    return {
      content,
      reasoningContent: reasoning || undefined,
      toolCalls: toolCalls.length ? toolCalls : undefined,
      usage: usage.result(),
      ...(typeof message?.model === 'string' ? { responseModel: message.model as string } : {}),
      ...(typeof message?.stop_reason === 'string'
        ? { finishReason: message.stop_reason as string }
        : {}),
    };
  }

  /**
   * Streams one call. Yields text and thinking deltas as they arrive, the usage once the message
   * ends, then the assembled tool calls (in block order).
   */
  async *stream(request: ChatRequest): AsyncGenerator<ChatStreamChunk, void, undefined> {
    if (request.signal.aborted) throw new this.sdk.APIUserAbortError();
    const params = this.buildParams(request);
    const budget = new CallBudget(idleTimeoutOf(request, this.options));
    yield* retryStream(() => this.attempt(request, params, budget), this.policy, {
      ...this.retryControl(request),
      remainingMs: () => budget.remainingMs(),
    });
  }

  /** Readiness probe: lists one model; throws when the endpoint cannot be reached. */
  async ping(): Promise<void> {
    await this.client.models.list({ limit: 1 }, { timeout: PING_TIMEOUT_MS, maxRetries: 0 });
  }

  /** One streamed attempt; `budget` is shared by the attempts of the call. */
  private async *attempt(
    request: ChatRequest,
    params: WireParams,
    budget: CallBudget,
  ): AsyncGenerator<ChatStreamChunk, void, undefined> {
    const ctx = this.context(request);
    const call = new CallSignal(request.signal, budget);
    const reader = new MessageStreamReader(ctx);
    let completed = false;
    try {
      const { data, response } = await this.client.messages
        .create({ ...params, stream: true } as unknown as MessageCreateParamsStreaming, {
          signal: call.signal,
        })
        .withResponse();
      call.touch();
      for await (const event of answerEvents(data, response, this.sdk, ctx)) {
        call.touch();
        for (const out of reader.read(event)) {
          budget.answered();
          call.pause();
          yield out;
          call.resume();
        }
        if (reader.finished) break;
      }
      completed = true;
    } catch (error) {
      throw this.failure(request, error, call);
    } finally {
      call.end(completed);
    }
    if (request.signal.aborted) throw new this.sdk.APIUserAbortError();
    if (call.stalled) throw stalled(ctx, call.stalled);
    if (!reader.finished) throw disconnected(ctx);
    const usage = reader.usage.result();
    if (usage) yield { usage };
    const toolCalls = reader.toolCalls();
    this.thinkingCache.remember(toolCalls, reader.thinkingBlocks());
    const { meta } = reader;
    if (toolCalls.length) yield { toolCalls, ...meta };
    else if (meta.responseModel || meta.finishReason) yield { ...meta };
  }

  /** The error to throw for a failed attempt: an abort stays an abort. */
  private failure(request: ChatRequest, error: unknown, call?: CallSignal): unknown {
    if (request.signal.aborted) {
      return error instanceof this.sdk.APIUserAbortError ? error : new this.sdk.APIUserAbortError();
    }
    const ctx = this.context(request);
    if (call?.stalled) return stalled(ctx, call.stalled, error);
    return toProviderError(error, ctx, this.errors);
  }

  private retryControl(request: ChatRequest): RetryControl {
    return {
      signal: request.signal,
      retryable: (error) =>
        error instanceof ProviderError && error.retryable
          ? { retryAfterMs: error.retryAfterMs }
          : false,
      abortError: () => new this.sdk.APIUserAbortError(),
      onRetry: this.options.onRetry,
    };
  }

  private context(request: ChatRequest): ErrorContext {
    return {
      endpoint: this.endpoint,
      model: request.model,
      wire: 'Anthropic Messages API',
      timeoutMs: this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    };
  }

  /** Request fields common to `chat` and `stream`. */
  private buildParams(request: ChatRequest): WireParams {
    const caps = request.capabilities ?? this.capabilities(request.model);
    return toWireParams(request, caps, this.thinkingCache, this.options);
  }
}
