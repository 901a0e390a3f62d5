import { Inject, Injectable, Logger, OnApplicationShutdown, Optional } from '@nestjs/common';
import { get_encoding, type Tiktoken } from 'tiktoken';
import { WellKnownMetadataKeys, type ModelMessage, type ToolDefinition } from '../contracts';
import {
  encodingForModel,
  MAX_ENCODE_PIECE,
  splitForCounting,
  TOKEN_ENCODINGS,
  type TokenEncoding,
} from './encoding';
import { TokenWorkerPool } from './token-worker-pool';

/** Injection token of optional `TokenEstimatorOptions`. */
export const TOKEN_ESTIMATOR_OPTIONS = Symbol.for('agent:TokenEstimatorOptions');

/** Options of the `TokenEstimator`. */
export interface TokenEstimatorOptions {
  /** Texts longer than this many characters are counted in a worker by the async methods. @default 20000 */
  workerThreshold?: number;
  /** Number of worker threads. @default 2 */
  workers?: number;
}

/** Tokens every chat message costs besides its texts (OpenAI chat format). */
export const MESSAGE_OVERHEAD = 3;
/** Tokens every tool call of an assistant message costs besides its name and arguments. */
export const TOOL_CALL_OVERHEAD = 3;
/** Tokens that prime the model's reply; added once per message list. */
export const REPLY_PRIMING = 3;
/** Tokens every tool definition costs besides the JSON of its function definition. */
export const TOOL_DEFINITION_OVERHEAD = 4;
/** Default of `TokenEstimatorOptions.workerThreshold`. */
export const DEFAULT_WORKER_THRESHOLD = 20_000;

/** A token count per encoding: the shape of `metadata.tokenCount` on persisted messages. */
export type TokenCounts = Partial<Record<TokenEncoding, number>>;

/** The texts of a message that are counted, and its fixed overhead. */
interface MessageTexts {
  texts: string[];
  overhead: number;
}

/**
 * The texts of a message that cost tokens: role, content, reasoning, and each tool call's name and
 * arguments. Images are not counted; the tool-call id of a tool result is not counted either.
 */
function messageTexts(message: ModelMessage): MessageTexts {
  const content = message.content as unknown;
  const texts = [
    String(message.role ?? ''),
    typeof content === 'string' ? content : content == null ? '' : JSON.stringify(content),
  ];
  if (message.reasoningContent) texts.push(message.reasoningContent);
  const calls = message.toolCalls ?? [];
  for (const call of calls) texts.push(call.function?.name ?? '', call.function?.arguments ?? '');
  return { texts, overhead: MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * calls.length };
}

/** The JSON text a tool definition is counted as: `{ name, description, parameters }`. */
export function toolDefinitionJson(tool: ToolDefinition): string {
  return JSON.stringify({
    name: tool.name,
    description: tool.description,
    parameters: tool.parameters,
  });
}

/** A valid count in a stored `metadata.tokenCount`, if any. */
function persistedCount(message: ModelMessage, encoding: TokenEncoding): number | undefined {
  const stored = message.metadata?.[WellKnownMetadataKeys.TokenCount] as TokenCounts | undefined;
  const value = stored && typeof stored === 'object' ? stored[encoding] : undefined;
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}

/**
 * Counts tokens with tiktoken for usage accounting (U2, U4, U7).
 *
 * Both encoders are created once, at construction, and freed by `dispose()` (also run on
 * application shutdown). Message and tool-list counts are cached by object identity, so counted
 * messages and tool arrays must be treated as immutable: whoever changes a message's content
 * must make a new object and drop its `metadata.tokenCount`. A count persisted in
 * `metadata.tokenCount[encoding]` is trusted without encoding.
 */
@Injectable()
export class TokenEstimator implements OnApplicationShutdown {
  /** Texts longer than this many characters are counted in a worker by the async methods. */
  readonly workerThreshold: number;
  private readonly logger = new Logger(TokenEstimator.name);
  private encoders: Map<TokenEncoding, Tiktoken> | undefined;
  private messageCache = new WeakMap<object, TokenCounts>();
  private toolCache = new WeakMap<object, TokenCounts>();
  private readonly pool: TokenWorkerPool;
  private closing: Promise<void> | undefined;
  private workerFallbackLogged = false;

  /** Loads both encoders now (start-up), not on first use. */
  constructor(@Optional() @Inject(TOKEN_ESTIMATOR_OPTIONS) options?: TokenEstimatorOptions) {
    this.workerThreshold = options?.workerThreshold ?? DEFAULT_WORKER_THRESHOLD;
    this.pool = new TokenWorkerPool(Math.max(1, options?.workers ?? 2));
    this.encoders = new Map(TOKEN_ENCODINGS.map((name) => [name, get_encoding(name)]));
  }

  /** The encoding for a model name (`override` wins); never throws. See `encodingForModel`. */
  encodingFor(model: string, override?: TokenEncoding): TokenEncoding {
    return encodingForModel(model, override);
  }

  /** Tokens of a plain text (special-token markers are counted as ordinary text). */
  countText(text: string, encoding: TokenEncoding): number {
    if (!text) return 0;
    const encoder = this.encoder(encoding);
    if (text.length <= MAX_ENCODE_PIECE) return encoder.encode_ordinary(text).length;
    let total = 0;
    for (const piece of splitForCounting(text, MAX_ENCODE_PIECE)) {
      total += encoder.encode_ordinary(piece).length;
    }
    return total;
  }

  /**
   * Tokens of one message in the OpenAI chat format: 3 + role + content + reasoning, plus name,
   * arguments and 3 per tool call. Computed once per message object and encoding; a count in
   * `metadata.tokenCount[encoding]` is used as is.
   */
  countMessage(message: ModelMessage, encoding: TokenEncoding): number {
    const known = this.knownCount(message, encoding);
    if (known !== undefined) return known;
    const { texts, overhead } = messageTexts(message);
    let total = overhead;
    for (const text of texts) total += this.countText(text, encoding);
    return this.remember(message, encoding, total);
  }

  /** Sum of `countMessage` over the list plus the 3 reply-priming tokens. */
  countMessages(messages: readonly ModelMessage[], encoding: TokenEncoding): number {
    let total = REPLY_PRIMING;
    for (const message of messages) total += this.countMessage(message, encoding);
    return total;
  }

  /**
   * Tokens of the tool definitions: per tool, the JSON of `{ name, description, parameters }`
   * plus 4. 0 for none. Cached by array identity.
   */
  countTools(tools: readonly ToolDefinition[] | undefined, encoding: TokenEncoding): number {
    if (!tools || tools.length === 0) return 0;
    const cached = this.toolCache.get(tools)?.[encoding];
    if (cached !== undefined) return cached;
    let total = 0;
    for (const tool of tools) {
      total += TOOL_DEFINITION_OVERHEAD + this.countText(toolDefinitionJson(tool), encoding);
    }
    this.toolCache.set(tools, { ...this.toolCache.get(tools), [encoding]: total });
    return total;
  }

  /**
   * The value to store as the message's `metadata.tokenCount`: the counts already stored for
   * other encodings with this encoding's count (computed or cached) set.
   */
  persistableCount(message: ModelMessage, encoding: TokenEncoding): TokenCounts {
    const counts: TokenCounts = {};
    for (const name of TOKEN_ENCODINGS) {
      const value = persistedCount(message, name);
      if (value !== undefined) counts[name] = value;
    }
    counts[encoding] = this.countMessage(message, encoding);
    return counts;
  }

  /**
   * Like `countText`, but a text longer than `workerThreshold` characters is counted in a
   * worker thread so the event loop stays free. Falls back to counting inline if a worker fails.
   */
  async countTextAsync(text: string, encoding: TokenEncoding): Promise<number> {
    if (text.length <= this.workerThreshold) return this.countText(text, encoding);
    this.encoder(encoding);
    try {
      return await this.pool.count(text, encoding);
    } catch (error) {
      if (!this.encoders) throw error;
      if (!this.workerFallbackLogged) {
        this.workerFallbackLogged = true;
        this.logger.warn(`token worker failed, counting inline: ${(error as Error).message}`);
      }
      return this.countText(text, encoding);
    }
  }

  /** Like `countMessage`, counting large texts in a worker; fills the same cache. */
  async countMessageAsync(message: ModelMessage, encoding: TokenEncoding): Promise<number> {
    const known = this.knownCount(message, encoding);
    if (known !== undefined) return known;
    const { texts, overhead } = messageTexts(message);
    if (!texts.some((text) => text.length > this.workerThreshold)) {
      return this.countMessage(message, encoding);
    }
    const counts = await Promise.all(texts.map((text) => this.countTextAsync(text, encoding)));
    return this.remember(
      message,
      encoding,
      counts.reduce((sum, n) => sum + n, overhead),
    );
  }

  /** Like `countMessages`, counting large uncached messages in worker threads. */
  async countMessagesAsync(
    messages: readonly ModelMessage[],
    encoding: TokenEncoding,
  ): Promise<number> {
    const counts = await Promise.all(messages.map((m) => this.countMessageAsync(m, encoding)));
    return counts.reduce((sum, n) => sum + n, REPLY_PRIMING);
  }

  /** Forgets every cached message and tool-list count (persisted counts are still honoured). */
  clearCache(): void {
    this.messageCache = new WeakMap();
    this.toolCache = new WeakMap();
  }

  /** Whether `dispose()` has run. */
  get disposed(): boolean {
    return this.encoders === undefined;
  }

  /** Frees both encoders and terminates the workers. Idempotent; counting afterwards throws. */
  dispose(): Promise<void> {
    if (this.encoders) {
      for (const encoder of this.encoders.values()) encoder.free();
      this.encoders = undefined;
      this.closing = this.pool.close();
    }
    return this.closing ?? Promise.resolve();
  }

  /** Nest shutdown hook: `dispose()`. */
  onApplicationShutdown(): Promise<void> {
    return this.dispose();
  }

  private encoder(encoding: TokenEncoding): Tiktoken {
    if (!this.encoders) throw new Error('TokenEstimator is disposed');
    const encoder = this.encoders.get(encoding);
    if (!encoder) throw new Error(`Unknown token encoding: ${String(encoding)}`);
    return encoder;
  }

  private knownCount(message: ModelMessage, encoding: TokenEncoding): number | undefined {
    return this.messageCache.get(message)?.[encoding] ?? persistedCount(message, encoding);
  }

  private remember(message: ModelMessage, encoding: TokenEncoding, count: number): number {
    const counts = this.messageCache.get(message);
    if (counts) counts[encoding] = count;
    else this.messageCache.set(message, { [encoding]: count });
    return count;
  }
}
