import { randomUUID } from 'node:crypto';
import OpenAI, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from 'openai';
import type {
  ChatCompletionChunk,
  ChatCompletionContentPart,
  ChatCompletionCreateParamsBase,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import type {
  ChatRequest,
  ChatResponse,
  ChatStreamChunk,
  LlmProvider,
  ModelCapabilities,
  ModelMessage,
  ProviderUsage,
  ToolCall,
  ToolDefinition,
} from '../../contracts';
import { CallSignal } from '../call-signal';
import { safeFetch } from '../fetch';
import {
  endpointLabel,
  disconnected,
  isDroppedConnection,
  ProviderError,
  stalled,
  StreamTruncatedError,
  toProviderError,
  type ErrorContext,
} from '../provider-error';
import {
  DEFAULT_IDLE_TIMEOUT_MS,
  DEFAULT_TIMEOUT_MS,
  policyOf,
  retryCall,
  retryStream,
  type ResilienceOptions,
  type RetryControl,
  type RetryPolicy,
} from '../retry';

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
}

/** Milliseconds `ping()` waits for `GET /models`. */
const PING_TIMEOUT_MS = 5000;

/** Model names that use the `o200k_base` encoding (optionally behind a `vendor/` prefix). */
const O200K_MODEL = /(?:^|\/)(?:gpt-4o|gpt-4\.1|gpt-5|o1|o3|o4)(?:[-.:_]|$)/i;

/** Chat-completions request fields shared by `chat` and `stream`. */
type BaseParams = Omit<ChatCompletionCreateParamsBase, 'stream'>;

/** The delta of a streamed choice, including fields that OpenAI-compatible servers add. */
interface WireDelta {
  content?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
  tool_calls?: WireToolCallDelta[] | null;
}

/** One tool-call delta as servers really send it (`index`, `id` and `type` may be missing). */
interface WireToolCallDelta {
  index?: number;
  id?: string | null;
  function?: { name?: string | null; arguments?: unknown } | null;
}

/** Wire usage, as in chat-completions answers. */
interface WireUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
}

const OPENAI_ERRORS = { APIError, APIConnectionError, APIConnectionTimeoutError };

/**
 * A model provider for any OpenAI-compatible chat-completions endpoint (OpenAI, Azure-style
 * routers, vLLM, llama.cpp, Ollama, LM Studio, Groq, DeepSeek, xAI, Mistral, ...), built on the
 * official `openai` SDK. It serves any model name.
 *
 * Resilience: the SDK's own retries are off; this provider retries connection errors, 408, 409,
 * 429 and 5xx answers (and streams that break before their first chunk) with exponential backoff
 * and full jitter, honouring `Retry-After`, but never once a chunk was yielded. A stream that
 * stays silent longer than `idleTimeoutMs` is given up.
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
      fetch: doneAwareFetch,
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
      () =>
        this.client.chat.completions
          .create({ ...this.buildParams(request), stream: false }, { signal: request.signal })
          .catch((error: unknown) => {
            throw this.failure(request, error);
          }),
      this.policy,
      this.retryControl(request),
    );
    const message: Record<string, any> = completion.choices?.[0]?.message ?? {};
    const parts = splitContent(message.content);
    const reasoning = firstText(message.reasoning_content, message.reasoning) + parts.reasoning;
    const assembler = new ToolCallAssembler();
    assembler.add(message.tool_calls);
    const toolCalls = assembler.result();
    return {
      content: parts.content,
      reasoningContent: reasoning || undefined,
      toolCalls: toolCalls.length ? toolCalls : undefined,
      usage: completion.usage ? toUsage(completion.usage) : undefined,
    };
  }

  /**
   * Streams one call. Yields text and reasoning deltas as they arrive, `usage` when the server
   * reports it, and the assembled tool calls (in index order) once at the end.
   */
  async *stream(request: ChatRequest): AsyncGenerator<ChatStreamChunk, void, undefined> {
    if (request.signal.aborted) throw new APIUserAbortError();
    yield* retryStream(() => this.attempt(request), this.policy, this.retryControl(request));
  }

  /** Readiness probe: lists the models; throws when the endpoint cannot be reached. */
  async ping(): Promise<void> {
    await this.client.models.list({ timeout: PING_TIMEOUT_MS, maxRetries: 0 });
  }

  /** One streamed attempt. */
  private async *attempt(request: ChatRequest): AsyncGenerator<ChatStreamChunk, void, undefined> {
    const call = new CallSignal(
      request.signal,
      this.options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
    );
    const assembler = new ToolCallAssembler();
    let finished = false;
    try {
      const chunks = await this.openStream(request, call.signal);
      call.touch();
      for await (const chunk of chunks) {
        call.touch();
        if (chunk.choices?.some((choice) => choice.finish_reason)) finished = true;
        for (const out of readChunk(chunk, assembler)) yield out;
      }
    } catch (error) {
      // A server that closes without `[DONE]` after a finished choice has still answered.
      if (!(finished && isDroppedConnection(error))) {
        throw this.failure(request, error, call);
      }
    } finally {
      call.stop();
    }
    // The SDK ends a stream silently when its request is aborted.
    if (request.signal.aborted) throw new APIUserAbortError();
    if (call.timedOut) throw stalled(this.context(request), call.idleTimeoutMs);
    const toolCalls = assembler.result();
    if (toolCalls.length) yield { toolCalls };
  }

  /** Sends the streaming request; drops `stream_options` for endpoints that reject it. */
  private async openStream(request: ChatRequest, signal: AbortSignal) {
    const params = { ...this.buildParams(request), stream: true as const };
    if (this.streamOptionsRejected) return this.client.chat.completions.create(params, { signal });
    try {
      return await this.client.chat.completions.create(
        { ...params, stream_options: { include_usage: true } },
        { signal },
      );
    } catch (error) {
      if (!(
        error instanceof APIError &&
        error.status === 400 &&
        /stream_options/i.test(error.message)
      )) {
        throw error;
      }
      this.streamOptionsRejected = true;
      return this.client.chat.completions.create(params, { signal });
    }
  }

  /** The error to throw for a failed attempt: an abort stays an abort. */
  private failure(request: ChatRequest, error: unknown, call?: CallSignal): unknown {
    if (request.signal.aborted) {
      return error instanceof APIUserAbortError ? error : new APIUserAbortError();
    }
    if (call?.timedOut) return stalled(this.context(request), call.idleTimeoutMs, error);
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
    const params: BaseParams = {
      model: request.model,
      messages: request.messages.map(toWireMessage),
    };
    if (request.tools?.length) params.tools = request.tools.map(toWireTool);
    if (request.maxTokens !== undefined) params.max_tokens = request.maxTokens;
    if (request.think && (request.capabilities ?? this.capabilities(request.model)).reasoning) {
      params.reasoning_effort = 'high';
    }
    return params;
  }
}

/**
 * `fetch` that watches event streams for the closing `data: [DONE]` line: a stream whose body
 * ends without it fails with {@link StreamTruncatedError}, so a connection closed mid-answer is
 * told apart from a finished answer (the SDK ends both silently).
 */
async function doneAwareFetch(
  input: string | URL | Request,
  init?: RequestInit,
): Promise<Response> {
  const response = await safeFetch(input, init);
  const type = response.headers.get('content-type') ?? '';
  if (!response.body || !type.includes('text/event-stream')) return response;
  const decoder = new TextDecoder();
  let tail = '';
  let done = false;
  const watch = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      if (!done) {
        const text = tail + decoder.decode(chunk, { stream: true });
        done = /(?:^|[\r\n])data:[ \t]*\[DONE\]/.test(text);
        tail = text.slice(-32);
      }
      controller.enqueue(chunk);
    },
    flush(controller) {
      if (!done) controller.error(new StreamTruncatedError());
    },
  });
  return new Response(response.body.pipeThrough(watch), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/** The stream chunks of one wire chunk; tool-call deltas go to `assembler`. */
function* readChunk(
  chunk: ChatCompletionChunk,
  assembler: ToolCallAssembler,
): Generator<ChatStreamChunk> {
  const delta = chunk.choices?.[0]?.delta as WireDelta | undefined;
  if (delta) {
    const reasoning = firstText(delta.reasoning_content, delta.reasoning);
    if (reasoning) yield { reasoningDelta: reasoning };
    const parts = splitContent(delta.content);
    if (parts.reasoning) yield { reasoningDelta: parts.reasoning };
    if (parts.content) yield { contentDelta: parts.content };
    assembler.add(delta.tool_calls);
  }
  if (chunk.usage) yield { usage: toUsage(chunk.usage) };
}

/** The first non-empty string among `values`, else `''`. */
function firstText(...values: unknown[]): string {
  for (const value of values) if (typeof value === 'string' && value) return value;
  return '';
}

/**
 * Text and reasoning of a wire `content`: a string, or (Mistral / Magistral) an array of parts
 * where `{type:'text', text}` is text and `{type:'thinking', thinking:[{type:'text', text}]}` is
 * reasoning.
 */
function splitContent(content: unknown): { content: string; reasoning: string } {
  if (typeof content === 'string') return { content, reasoning: '' };
  const out = { content: '', reasoning: '' };
  if (!Array.isArray(content)) return out;
  for (const part of content as Array<Record<string, any>>) {
    if (part?.type === 'text' && typeof part.text === 'string') out.content += part.text;
    if (part?.type === 'thinking') out.reasoning += thinkingText(part.thinking);
  }
  return out;
}

/** The text of a `thinking` part: a string or an array of text parts. */
function thinkingText(thinking: unknown): string {
  if (typeof thinking === 'string') return thinking;
  if (!Array.isArray(thinking)) return '';
  return thinking.map((part) => (typeof part?.text === 'string' ? part.text : '')).join('');
}

/** Wire usage to `ProviderUsage`; a missing total is the sum of the two parts. */
function toUsage(usage: WireUsage): ProviderUsage {
  const promptTokens = usage.prompt_tokens;
  const completionTokens = usage.completion_tokens;
  const totalTokens =
    usage.total_tokens ??
    (promptTokens !== undefined && completionTokens !== undefined
      ? promptTokens + completionTokens
      : undefined);
  return { promptTokens, completionTokens, totalTokens };
}

/** A model message in the chat-completions wire shape (`metadata` and reasoning are dropped). */
function toWireMessage(message: ModelMessage): ChatCompletionMessageParam {
  switch (message.role) {
    case 'system':
      return { role: 'system', content: message.content };
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId ?? '', content: message.content };
    case 'assistant':
      if (!message.toolCalls?.length) return { role: 'assistant', content: message.content };
      return {
        role: 'assistant',
        content: message.content || null,
        tool_calls: message.toolCalls.map((call) => ({
          id: call.id,
          type: 'function',
          function: { name: call.function.name, arguments: call.function.arguments },
        })),
      };
    default:
      return { role: 'user', content: userContent(message) };
  }
}

/** A user message's content: a string, or text and image parts when it has images. */
function userContent(message: ModelMessage): string | ChatCompletionContentPart[] {
  if (!message.images?.length) return message.content;
  const parts: ChatCompletionContentPart[] = [];
  if (message.content) parts.push({ type: 'text', text: message.content });
  for (const url of message.images) parts.push({ type: 'image_url', image_url: { url } });
  return parts;
}

/** A tool definition in the chat-completions wire shape. */
function toWireTool(tool: ToolDefinition): ChatCompletionTool {
  return {
    type: 'function',
    function: { name: tool.name, description: tool.description, parameters: tool.parameters },
  };
}

/**
 * Assembles tool calls from deltas keyed by `index` (the position in the delta list when a
 * server omits it). Empty ids and names never overwrite real ones; arguments are appended.
 */
class ToolCallAssembler {
  private readonly calls = new Map<number, { id: string; name: string; arguments: string }>();

  add(deltas: WireToolCallDelta[] | null | undefined): void {
    if (!Array.isArray(deltas)) return;
    deltas.forEach((delta, position) => {
      const index = typeof delta.index === 'number' ? delta.index : position;
      let call = this.calls.get(index);
      if (!call) this.calls.set(index, (call = { id: '', name: '', arguments: '' }));
      if (delta.id) call.id = delta.id;
      if (delta.function?.name) call.name = delta.function.name;
      const args = delta.function?.arguments;
      if (typeof args === 'string') call.arguments += args;
      else if (args != null) call.arguments += JSON.stringify(args);
    });
  }

  /** The calls in index order; missing ids are generated, empty arguments become `{}`. */
  result(): ToolCall[] {
    return [...this.calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, call]) => ({
        id: call.id || `call_${randomUUID().replace(/-/g, '')}`,
        type: 'function' as const,
        function: { name: call.name, arguments: call.arguments || '{}' },
      }));
  }
}
