import OpenAI, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from 'openai';
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
  StreamTruncatedError,
  type ErrorContext,
} from '../provider-error';
import { isDroppedConnection, toProviderError } from '../provider-error.classification';
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
import { toWireParams, type BaseParams } from './openai-compatible.mapping';
import { answerChunks } from './openai-compatible.answer';
import { readChunk, readCompletion, ToolCallAssembler } from './openai-compatible.stream';

/** Options of an {@link OpenAiCompatibleProvider}. */
export interface OpenAiCompatibleProviderOptions extends ResilienceOptions {
  /** Provider instance id (`ModelRef.provider`). @default 'openai' */
  id?: string;
  /** Base URL of the endpoint, including the version path (e.g. `http://localhost:11434/v1`). */
  baseURL: string;
  /** API key; local servers ignore it. @default 'not-needed' */
  apiKey?: string;
  /** Model used when a `ModelRef` names none. */
  defaultModel?: string;
  /** Capability overrides per exact model name, merged over `defaultCapabilities`. */
  capabilities?: Record<string, Partial<ModelCapabilities>>;
  /** Capability overrides for every model, merged over the built-in defaults. */
  defaultCapabilities?: Partial<ModelCapabilities>;
  /** The `fetch` to send requests with (a proxy-aware one, a test double). @default global fetch */
  fetch?: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
}

/** Milliseconds `ping()` waits for `GET /models`. */
const PING_TIMEOUT_MS = 5000;

/** Model names that use the `o200k_base` encoding (optionally behind a `vendor/` prefix). */
const O200K_MODEL = /(?:^|\/)(?:gpt-4o|gpt-4\.1|gpt-5|o1|o3|o4)(?:[-.:_]|$)/i;

const OPENAI_ERRORS = { APIError, APIConnectionError, APIConnectionTimeoutError };

/**
 * A model provider for any OpenAI-compatible chat-completions endpoint (OpenAI, Azure-style
 * routers, vLLM, llama.cpp, Ollama, LM Studio, Groq, DeepSeek, xAI, Mistral, ...), built on the
 * official `openai` SDK. It serves any model name.
 *
 * Resilience: the SDK's own retries are off; this provider retries connection errors, 408, 409,
 * 429 and 5xx answers (and streams that break before their first chunk) with exponential backoff
 * and full jitter, honouring `Retry-After`, but never once a chunk was yielded. A stream that
 * stays silent longer than `idleTimeoutMs` (before its headers or between chunks) is given up,
 * and the attempts before the first token share twice that in total, waits included.
 *
 * Answers that are not streams: a JSON completion (a proxy that ignores `stream: true`) is
 * taken as the answer; any other content type (an HTML login page) fails naming it.
 *
 * Memory: each attempt has its own abort controller, unlinked from the caller's signal when it
 * ends, so a long-lived caller signal collects no listeners and keeps nothing alive.
 *
 * Errors: every failure is a {@link ProviderError} whose message is one sentence telling the user
 * what to do (unreachable endpoint, 401, unknown model, context length, rate limit, malformed or
 * cut stream, ...). An abort through `ChatRequest.signal` always surfaces as the SDK's
 * `APIUserAbortError` (`instanceof APIUserAbortError` from `openai`), whether it happens before
 * the answer starts, during a retry wait, or mid-stream (where the SDK itself would end the
 * stream silently).
 */
export class OpenAiCompatibleProvider implements LlmProvider {
  /** Provider instance id. */
  readonly id: string;
  /** Default model name, if configured. */
  readonly defaultModel?: string;
  /** The base URL as shown in logs and notices (no credentials, no query). */
  readonly endpoint: string;
  private readonly client: OpenAI;
  private readonly policy: RetryPolicy;
  /** Set once the endpoint rejected `stream_options`: usage then comes only if sent unasked. */
  private streamOptionsRejected = false;

  constructor(private readonly options: OpenAiCompatibleProviderOptions) {
    this.id = options.id ?? 'openai';
    this.defaultModel = options.defaultModel;
    this.endpoint = endpointLabel(options.baseURL);
    this.policy = policyOf(options);
    this.client = new OpenAI({
      baseURL: options.baseURL,
      apiKey: options.apiKey || 'not-needed',
      maxRetries: 0,
      timeout: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      fetch: options.fetch ? safeFetchOf(options.fetch) : safeFetch,
      // Failures reach the caller as one-sentence ProviderErrors; the SDK's console lines would
      // only repeat them (and print raw stream data).
      logLevel: 'off',
    });
  }

  /** Capabilities of `model`: built-in defaults, then `defaultCapabilities`, then per model. */
  capabilities(model: string): ModelCapabilities {
    return {
      contextWindow: 128_000,
      maxOutputTokens: 4096,
      vision: false,
      tools: true,
      encoding: O200K_MODEL.test(model) ? 'o200k_base' : 'cl100k_base',
      ...this.options.defaultCapabilities,
      ...this.options.capabilities?.[model],
    };
  }

  /** One non-streaming call (retried as a whole on retryable errors). */
  async chat(request: ChatRequest): Promise<ChatResponse> {
    if (request.signal.aborted) throw new APIUserAbortError();
    const completion = await retryCall(
      async () => {
        // No idle timeout: a whole answer comes at once, after all of its generation.
        const call = new CallSignal(request.signal, new CallBudget(0));
        try {
          return await this.client.chat.completions.create(
            { ...this.buildParams(request), stream: false },
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
    return readCompletion(completion);
  }

  /**
   * Streams one call. Yields text and reasoning deltas as they arrive, `usage` when the server
   * reports it, and the assembled tool calls (in index order) once at the end.
   */
  async *stream(request: ChatRequest): AsyncGenerator<ChatStreamChunk, void, undefined> {
    if (request.signal.aborted) throw new APIUserAbortError();
    const budget = new CallBudget(idleTimeoutOf(request, this.options));
    yield* retryStream(() => this.attempt(request, budget), this.policy, {
      ...this.retryControl(request),
      remainingMs: () => budget.remainingMs(),
    });
  }

  /** Readiness probe: lists the models; throws when the endpoint cannot be reached. */
  async ping(): Promise<void> {
    await this.client.models.list({ timeout: PING_TIMEOUT_MS, maxRetries: 0 });
  }

  /** One streamed attempt; `budget` is shared by the attempts of the call. */
  private async *attempt(
    request: ChatRequest,
    budget: CallBudget,
  ): AsyncGenerator<ChatStreamChunk, void, undefined> {
    const ctx = this.context(request);
    const call = new CallSignal(request.signal, budget);
    const assembler = new ToolCallAssembler();
    const meta: Pick<ChatStreamChunk, 'responseModel' | 'finishReason'> = {};
    let finished = false;
    let completed = false;
    try {
      const response = await this.openStream(request, call.signal);
      call.touch();
      for await (const chunk of answerChunks(response, call.controller, this.client, ctx)) {
        call.touch();
        if (chunk.model) meta.responseModel = chunk.model;
        const reason = chunk.choices?.find((choice) => choice.finish_reason)?.finish_reason;
        if (reason) finished = Boolean((meta.finishReason = reason));
        for (const out of readChunk(chunk, assembler)) {
          budget.answered();
          call.pause();
          yield out;
          call.resume();
        }
      }
      completed = true;
    } catch (error) {
      // A server that closes without `[DONE]` after a finished choice has still answered.
      if (!(finished && isDroppedConnection(error))) throw this.failure(request, error, call);
      completed = true;
    } finally {
      call.end(completed);
    }
    // The SDK ends a stream silently when its request is aborted.
    if (request.signal.aborted) throw new APIUserAbortError();
    if (call.stalled) throw stalled(ctx, call.stalled);
    const toolCalls = assembler.result();
    if (toolCalls.length) yield { toolCalls, ...meta };
    else if (meta.responseModel || meta.finishReason) yield meta;
  }

  /**
   * Sends the streaming request and resolves with the raw response once its headers came (error
   * statuses throw the SDK's errors); drops `stream_options` for endpoints that reject it.
   */
  private async openStream(request: ChatRequest, signal: AbortSignal): Promise<Response> {
    const params = { ...this.buildParams(request), stream: true as const };
    const send = (body: typeof params) =>
      this.client.chat.completions.create(body, { signal }).asResponse();
    if (this.streamOptionsRejected) return send(params);
    try {
      return await send({ ...params, stream_options: { include_usage: true } });
    } catch (error) {
      if (!(
        error instanceof APIError &&
        error.status === 400 &&
        /stream_options/i.test(error.message)
      )) {
        throw error;
      }
      this.streamOptionsRejected = true;
      return send(params);
    }
  }

  /** The error to throw for a failed attempt: an abort stays an abort. */
  private failure(request: ChatRequest, error: unknown, call?: CallSignal): unknown {
    if (request.signal.aborted) {
      return error instanceof APIUserAbortError ? error : new APIUserAbortError();
    }
    if (call?.stalled) return stalled(this.context(request), call.stalled, error);
    if (error instanceof StreamTruncatedError) return disconnected(this.context(request), error);
    return toProviderError(error, this.context(request), OPENAI_ERRORS);
  }

  private retryControl(request: ChatRequest): RetryControl {
    return {
      signal: request.signal,
      retryable: (error) =>
        error instanceof ProviderError && error.retryable
          ? { retryAfterMs: error.retryAfterMs }
          : false,
      abortError: () => new APIUserAbortError(),
      onRetry: this.options.onRetry,
    };
  }

  private context(request: ChatRequest): ErrorContext {
    return {
      endpoint: this.endpoint,
      model: request.model,
      wire: 'OpenAI-compatible',
      timeoutMs: this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    };
  }

  /** Request fields common to `chat` and `stream`. */
  private buildParams(request: ChatRequest): BaseParams {
    const think =
      !!request.think && !!(request.capabilities ?? this.capabilities(request.model)).reasoning;
    return toWireParams(request, think);
  }
}
