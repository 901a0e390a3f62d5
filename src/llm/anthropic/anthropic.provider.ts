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
  ModelMessage,
  ProviderUsage,
  ToolCall,
  ToolDefinition,
} from '../../contracts';
import { CallSignal } from '../call-signal';
import { safeFetch } from '../fetch';
import {
  disconnected,
  endpointLabel,
  malformed,
  ProviderError,
  stalled,
  toProviderError,
  type ErrorContext,
  type SdkErrorClasses,
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

/** The `@anthropic-ai/sdk` module. */
type AnthropicSdk = typeof import('@anthropic-ai/sdk');

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
}

/** Milliseconds `ping()` waits for `GET /v1/models`. */
const PING_TIMEOUT_MS = 5000;
const DEFAULT_BASE_URL = 'https://api.anthropic.com';
/** Model names with extended thinking: Claude 3.7 and Claude 4 or later (`claude-<family>-4...`). */
const REASONING_MODEL = /claude-(?:3-7|[a-z]+-[4-9]|[4-9](?:[-.]|$))/i;
/** Thinking blocks kept for tool-use loops (see `thinkingFor`). */
const THINKING_CACHE_SIZE = 512;
const MIN_THINKING_BUDGET = 1024;

let sdkModule: AnthropicSdk | undefined;

/**
 * @internal
 * Loads `@anthropic-ai/sdk` on first use, so the package is needed only by servers that use
 * this provider. Throws one clear line when it is missing.
 */
export function loadAnthropicSdk(): AnthropicSdk {
  if (sdkModule) return sdkModule;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    sdkModule = require('@anthropic-ai/sdk') as AnthropicSdk;
  } catch (error) {
    const missing =
      (error as { code?: string })?.code === 'MODULE_NOT_FOUND' &&
      String((error as Error).message).includes("'@anthropic-ai/sdk'");
    const detail = String((error as Error)?.message ?? error).split('\n')[0];
    throw new Error(
      missing
        ? 'The Anthropic provider needs the @anthropic-ai/sdk package: run "npm install @anthropic-ai/sdk"'
        : `The @anthropic-ai/sdk package failed to load (${detail}): reinstall it with "npm install @anthropic-ai/sdk"`,
      { cause: error },
    );
  }
  return sdkModule;
}

/** A content block as sent to the Messages API. */
type WireBlock = Record<string, unknown> & { type: string };

/** A message as sent to the Messages API. */
interface WireMessage {
  role: 'user' | 'assistant';
  content: WireBlock[];
}

/** Messages API request fields shared by `chat` and `stream`. */
interface WireParams {
  model: string;
  max_tokens: number;
  messages: WireMessage[];
  system?: string;
  tools?: Array<{ name: string; description: string; input_schema: Record<string, unknown> }>;
  thinking?: { type: 'enabled'; budget_tokens: number } | { type: 'adaptive' };
}

/** Usage fields of `message_start` and `message_delta` (any may be missing or null). */
interface WireUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
}

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
 * the first streamed chunk, never after; failures are one-sentence `ProviderError`s; an abort
 * surfaces as the SDK's `APIUserAbortError`.
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
  private readonly thinkingCache = new Map<string, WireBlock[]>();

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
      fetch: safeFetch,
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
      () =>
        this.client.messages
          .create({ ...params, stream: false } as unknown as MessageCreateParamsNonStreaming, {
            signal: request.signal,
          })
          .catch((error: unknown) => {
            throw this.failure(request, error);
          }),
      this.policy,
      this.retryControl(request),
    );
    let content = '';
    let reasoning = '';
    const toolCalls: ToolCall[] = [];
    const thinking: WireBlock[] = [];
    for (const block of Array.isArray(message?.content) ? message.content : []) {
      if (block?.type === 'text' && typeof block.text === 'string') content += block.text;
      if (block?.type === 'thinking') {
        if (typeof block.thinking === 'string') reasoning += block.thinking;
        thinking.push(block);
      }
      if (block?.type === 'redacted_thinking') thinking.push(block);
      if (block?.type === 'tool_use') {
        toolCalls.push({
          id: String(block.id),
          type: 'function',
          function: { name: String(block.name), arguments: JSON.stringify(block.input ?? {}) },
        });
      }
    }
    this.remember(toolCalls, thinking);
    const usage = new UsageTracker();
    usage.add(message?.usage);
    return {
      content,
      reasoningContent: reasoning || undefined,
      toolCalls: toolCalls.length ? toolCalls : undefined,
      usage: usage.result(),
    };
  }

  /**
   * Streams one call. Yields text and thinking deltas as they arrive, the usage once the message
   * ends, then the assembled tool calls (in block order).
   */
  async *stream(request: ChatRequest): AsyncGenerator<ChatStreamChunk, void, undefined> {
    if (request.signal.aborted) throw new this.sdk.APIUserAbortError();
    const params = this.buildParams(request);
    yield* retryStream(
      () => this.attempt(request, params),
      this.policy,
      this.retryControl(request),
    );
  }

  /** Readiness probe: lists one model; throws when the endpoint cannot be reached. */
  async ping(): Promise<void> {
    await this.client.models.list({ limit: 1 }, { timeout: PING_TIMEOUT_MS, maxRetries: 0 });
  }

  /** One streamed attempt. */
  private async *attempt(
    request: ChatRequest,
    params: WireParams,
  ): AsyncGenerator<ChatStreamChunk, void, undefined> {
    const ctx = this.context(request);
    const call = new CallSignal(
      request.signal,
      this.options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
    );
    const reader = new MessageStreamReader(ctx);
    try {
      const events = await this.client.messages.create(
        { ...params, stream: true } as unknown as MessageCreateParamsStreaming,
        { signal: call.signal },
      );
      call.touch();
      for await (const event of events) {
        call.touch();
        for (const out of reader.read(event)) yield out;
        if (reader.finished) break;
      }
    } catch (error) {
      throw this.failure(request, error, call);
    } finally {
      call.stop();
    }
    if (request.signal.aborted) throw new this.sdk.APIUserAbortError();
    if (call.timedOut) throw stalled(ctx, call.idleTimeoutMs);
    if (!reader.finished) throw disconnected(ctx);
    const usage = reader.usage.result();
    if (usage) yield { usage };
    const toolCalls = reader.toolCalls();
    this.remember(toolCalls, reader.thinkingBlocks());
    if (toolCalls.length) yield { toolCalls };
  }

  /** The error to throw for a failed attempt: an abort stays an abort. */
  private failure(request: ChatRequest, error: unknown, call?: CallSignal): unknown {
    if (request.signal.aborted) {
      return error instanceof this.sdk.APIUserAbortError ? error : new this.sdk.APIUserAbortError();
    }
    const ctx = this.context(request);
    if (call?.timedOut) return stalled(ctx, call.idleTimeoutMs, error);
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

  /** Keeps the thinking blocks of a tool-use answer for the next call of the tool loop. */
  private remember(toolCalls: ToolCall[], thinking: WireBlock[]): void {
    if (!toolCalls.length || !thinking.length) return;
    for (const call of toolCalls) {
      this.thinkingCache.delete(call.id);
      this.thinkingCache.set(call.id, thinking);
    }
    while (this.thinkingCache.size > THINKING_CACHE_SIZE) {
      this.thinkingCache.delete(this.thinkingCache.keys().next().value as string);
    }
  }

  /** Thinking blocks to send before the tool calls of an earlier answer, if kept. */
  private thinkingFor(message: ModelMessage): WireBlock[] | undefined {
    const id = message.toolCalls?.[0]?.id;
    return id === undefined ? undefined : this.thinkingCache.get(id);
  }

  /** Request fields common to `chat` and `stream`. */
  private buildParams(request: ChatRequest): WireParams {
    const caps = request.capabilities ?? this.capabilities(request.model);
    const { system, messages } = toAnthropicMessages(request.messages, (m) => this.thinkingFor(m));
    const params: WireParams = {
      model: request.model,
      max_tokens: request.maxTokens ?? caps.maxOutputTokens,
      messages,
    };
    if (system) params.system = system;
    if (request.tools?.length) params.tools = request.tools.map(toWireTool);
    if (request.think && caps.reasoning && this.canThink(request.messages)) {
      if (this.options.adaptiveThinking) {
        params.thinking = { type: 'adaptive' };
      } else {
        const cap = this.options.thinkingBudgetTokens ?? 16_000;
        const budget = Math.max(
          MIN_THINKING_BUDGET,
          Math.min(cap, Math.floor(params.max_tokens / 2)),
        );
        if (budget < params.max_tokens) {
          params.thinking = { type: 'enabled', budget_tokens: budget };
        }
      }
    }
    return params;
  }

  /**
   * Whether thinking may be on: inside a tool loop (the conversation ends with tool results) the
   * API wants the loop's tool-use answer to start with its signed thinking blocks, which exist
   * only when this provider produced that answer with thinking on.
   */
  private canThink(messages: ModelMessage[]): boolean {
    if (messages.at(-1)?.role !== 'tool') return true;
    for (let i = messages.length - 1; i >= 0; i--) {
      const message = messages[i];
      if (message.role === 'tool') continue;
      return (
        !(message.role === 'assistant' && message.toolCalls?.length) || !!this.thinkingFor(message)
      );
    }
    return true;
  }
}

/** Token usage gathered from `message_start` and `message_delta` (later values win). */
class UsageTracker {
  private input?: number;
  private output?: number;
  private cacheCreation?: number;
  private cacheRead?: number;

  add(usage: WireUsage | null | undefined): void {
    if (!usage || typeof usage !== 'object') return;
    const num = (value: unknown) => (typeof value === 'number' ? value : undefined);
    this.input = num(usage.input_tokens) ?? this.input;
    this.output = num(usage.output_tokens) ?? this.output;
    this.cacheCreation = num(usage.cache_creation_input_tokens) ?? this.cacheCreation;
    this.cacheRead = num(usage.cache_read_input_tokens) ?? this.cacheRead;
  }

  /** Prompt tokens include cache reads and writes (all of them fill the context window). */
  result(): ProviderUsage | undefined {
    if (this.input === undefined && this.output === undefined) return undefined;
    const promptTokens =
      this.input === undefined
        ? undefined
        : this.input + (this.cacheCreation ?? 0) + (this.cacheRead ?? 0);
    const completionTokens = this.output;
    const totalTokens =
      promptTokens !== undefined && completionTokens !== undefined
        ? promptTokens + completionTokens
        : undefined;
    return { promptTokens, completionTokens, totalTokens };
  }
}

/** A content block being streamed. */
interface OpenBlock {
  type: string;
  /** tool_use: id, name and the input JSON so far. */
  id?: string;
  name?: string;
  json?: string;
  /** tool_use: the input of `content_block_start` (used when no JSON deltas follow). */
  input?: unknown;
  /** thinking: text and signature, kept to send back in tool loops. */
  thinking?: string;
  signature?: string;
  /** redacted_thinking: the opaque data. */
  data?: string;
}

/**
 * Turns Messages API stream events into stream chunks. Repeated `message_start`s of the same
 * message are ignored; a different message starting before the first one stopped is a
 * malformed stream.
 */
class MessageStreamReader {
  readonly usage = new UsageTracker();
  private messageId?: string;
  private stopped = false;
  private readonly blocks = new Map<number, OpenBlock>();

  constructor(private readonly ctx: ErrorContext) {}

  /** Whether `message_stop` arrived. */
  get finished(): boolean {
    return this.stopped;
  }

  *read(raw: unknown): Generator<ChatStreamChunk> {
    const event = raw as Record<string, any>;
    if (!event || typeof event !== 'object' || this.stopped) return;
    switch (event.type) {
      case 'message_start': {
        const id = typeof event.message?.id === 'string' ? event.message.id : '';
        if (this.messageId !== undefined && id !== this.messageId) {
          throw malformed(this.ctx, 'a second message started before the first one ended');
        }
        if (this.messageId === undefined) this.usage.add(event.message?.usage);
        this.messageId = id;
        return;
      }
      case 'content_block_start':
        yield* this.startBlock(event.index, event.content_block ?? {});
        return;
      case 'content_block_delta':
        yield* this.delta(event.index, event.delta ?? {});
        return;
      case 'message_delta':
        this.usage.add(event.usage);
        return;
      case 'message_stop':
        if (this.messageId === undefined) {
          throw malformed(this.ctx, 'the message stopped before it started');
        }
        this.stopped = true;
        return;
      default:
        // content_block_stop, ping and future events carry nothing to assemble.
        return;
    }
  }

  /** Tool calls in block order; empty input is `{}`. */
  toolCalls(): ToolCall[] {
    return this.sorted()
      .filter((block) => block.type === 'tool_use')
      .map((block) => ({
        id: block.id ?? '',
        type: 'function' as const,
        function: { name: block.name ?? '', arguments: toolArguments(block) },
      }));
  }

  /** The thinking and redacted-thinking blocks, as the API wants them sent back. */
  thinkingBlocks(): WireBlock[] {
    return this.sorted().flatMap((block): WireBlock[] => {
      if (block.type === 'thinking' && block.signature) {
        return [{ type: 'thinking', thinking: block.thinking ?? '', signature: block.signature }];
      }
      if (block.type === 'redacted_thinking' && block.data) {
        return [{ type: 'redacted_thinking', data: block.data }];
      }
      return [];
    });
  }

  private sorted(): OpenBlock[] {
    return [...this.blocks.entries()].sort(([a], [b]) => a - b).map(([, block]) => block);
  }

  private *startBlock(index: unknown, start: Record<string, any>): Generator<ChatStreamChunk> {
    if (this.messageId === undefined) {
      throw malformed(this.ctx, 'a content block came before message_start');
    }
    if (typeof index !== 'number') return;
    const block: OpenBlock = { type: String(start.type) };
    this.blocks.set(index, block);
    if (block.type === 'text' && typeof start.text === 'string' && start.text) {
      yield { contentDelta: start.text };
    } else if (block.type === 'thinking') {
      block.thinking = typeof start.thinking === 'string' ? start.thinking : '';
      block.signature = typeof start.signature === 'string' ? start.signature : '';
      if (block.thinking) yield { reasoningDelta: block.thinking };
    } else if (block.type === 'redacted_thinking') {
      block.data = typeof start.data === 'string' ? start.data : '';
    } else if (block.type === 'tool_use') {
      block.id = typeof start.id === 'string' ? start.id : '';
      block.name = typeof start.name === 'string' ? start.name : '';
      block.json = '';
      block.input = start.input;
    }
  }

  private *delta(index: unknown, delta: Record<string, any>): Generator<ChatStreamChunk> {
    const block = typeof index === 'number' ? this.blocks.get(index) : undefined;
    if (!block) throw malformed(this.ctx, 'a delta came for a block that never started');
    switch (delta.type) {
      case 'text_delta':
        if (typeof delta.text === 'string' && delta.text) yield { contentDelta: delta.text };
        return;
      case 'thinking_delta':
        if (typeof delta.thinking === 'string' && delta.thinking) {
          block.thinking = (block.thinking ?? '') + delta.thinking;
          yield { reasoningDelta: delta.thinking };
        }
        return;
      case 'signature_delta':
        if (typeof delta.signature === 'string') block.signature = delta.signature;
        return;
      case 'input_json_delta':
        if (typeof delta.partial_json === 'string')
          block.json = (block.json ?? '') + delta.partial_json;
        return;
      default:
        return;
    }
  }
}

/** The JSON arguments of a streamed tool_use block. */
function toolArguments(block: OpenBlock): string {
  if (block.json?.trim()) return block.json;
  const input = block.input;
  if (input && typeof input === 'object' && Object.keys(input).length) return JSON.stringify(input);
  return '{}';
}

/** Model messages as Messages API `system` and `messages`. */
export function toAnthropicMessages(
  messages: readonly ModelMessage[],
  thinkingFor: (message: ModelMessage) => WireBlock[] | undefined = () => undefined,
): { system?: string; messages: WireMessage[] } {
  const system: string[] = [];
  const out: WireMessage[] = [];
  const push = (role: WireMessage['role'], blocks: WireBlock[]) => {
    if (!blocks.length) return;
    const last = out.at(-1);
    // Consecutive turns of one role form one message: tool results stay first, as required.
    if (last?.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const message of messages) {
    switch (message.role) {
      case 'system':
        if (!out.length) {
          if (message.content.trim()) system.push(message.content);
        } else {
          push('user', textBlocks(`[system] ${message.content}`));
        }
        break;
      case 'tool':
        push('user', [
          {
            type: 'tool_result',
            tool_use_id: message.toolCallId ?? '',
            ...(message.content ? { content: message.content } : {}),
          },
        ]);
        break;
      case 'assistant': {
        const blocks: WireBlock[] = [];
        if (message.toolCalls?.length) blocks.push(...(thinkingFor(message) ?? []));
        blocks.push(...textBlocks(message.content));
        for (const call of message.toolCalls ?? []) {
          blocks.push({
            type: 'tool_use',
            id: call.id,
            name: call.function.name,
            input: parseArguments(call.function.arguments),
          });
        }
        push('assistant', blocks);
        break;
      }
      default:
        push('user', [
          ...(message.images ?? []).flatMap(imageBlock),
          ...textBlocks(message.content),
        ]);
    }
  }
  // The Messages API wants the conversation to open with a user turn.
  if (out[0]?.role === 'assistant') {
    out.unshift({ role: 'user', content: textBlocks('(earlier conversation omitted)') });
  }
  return { system: system.length ? system.join('\n\n') : undefined, messages: out };
}

/** A text block, or none for blank text (the API rejects empty text blocks). */
function textBlocks(text: string): WireBlock[] {
  return text.trim() ? [{ type: 'text', text }] : [];
}

/** Tool-call arguments as the `input` object; invalid or non-object JSON becomes `{}`. */
function parseArguments(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text || '{}');
    return value && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

/** An image block for a data or http(s) URL; other URLs are left out. */
function imageBlock(url: string): WireBlock[] {
  const data = /^data:([^;,]+)((?:;[^;,]*)*),(.*)$/s.exec(url);
  if (data) {
    const mediaType = data[1].toLowerCase().replace('image/jpg', 'image/jpeg');
    if (!IMAGE_TYPES.has(mediaType)) return [];
    const base64 = /;base64/i.test(data[2])
      ? data[3]
      : Buffer.from(decodeURIComponent(data[3]), 'utf8').toString('base64');
    return [{ type: 'image', source: { type: 'base64', media_type: mediaType, data: base64 } }];
  }
  if (/^https?:\/\//i.test(url)) return [{ type: 'image', source: { type: 'url', url } }];
  return [];
}

/** A tool definition in the Messages API shape (`input_schema` must be an object schema). */
function toWireTool(tool: ToolDefinition) {
  const schema = tool.parameters ?? {};
  return {
    name: tool.name,
    description: tool.description,
    input_schema: { ...schema, type: 'object' },
  };
}
