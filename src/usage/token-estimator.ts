import { Inject, Injectable, OnApplicationShutdown, Optional } from '@nestjs/common';
import type { ModelMessage, ToolDefinition } from '../contracts';
import {
  encodingForModel,
  MAX_ENCODE_PIECE,
  splitForCounting,
  TOKEN_ENCODINGS,
  type TokenEncoding,
} from './encoding';
import { countBatch, plus, settledOrPending } from './batch-count';
import { ContentCache } from './content-cache';
import { textCounter, type TextCounter } from './encoders';
import {
  messageTexts,
  persistedCount,
  stampCount,
  type MessageTexts,
  REPLY_PRIMING,
  TOOL_DEFINITION_OVERHEAD,
  toolDefinitionJson,
  type TokenCounts,
} from './message-texts';
import { TokenWorkerPool } from './token-worker-pool';

/** Injection token of optional `TokenEstimatorOptions`. */
export const TOKEN_ESTIMATOR_OPTIONS = Symbol.for('agent:TokenEstimatorOptions');

/** Default of `TokenEstimatorOptions.workerThreshold`. */
export const DEFAULT_WORKER_THRESHOLD = 20_000;

/** Options of the `TokenEstimator`. */
export interface TokenEstimatorOptions {
  /**
   * The async methods count in worker threads a text longer than this many characters, and
   * every uncached text of a list whose uncached texts add up to more. @default 20000
   */
  workerThreshold?: number;
  /** Number of worker threads. @default 2 */
  workers?: number;
}

/**
 * Counts tokens for usage accounting (U2, U4, U7) with OpenAI's BPE ranks (`o200k_base`,
 * `cl100k_base`) through `gpt-tokenizer`: the counts tiktoken gives, without its WebAssembly.
 *
 * Both encodings are loaded when the first estimator is made (once per process); `dispose()`
 * (also run on application shutdown) stops the worker threads. Counts are cached three ways:
 * texts by content (so a store that returns fresh objects costs no more than one that returns
 * the same ones), messages and tool definitions by object identity. Counted messages and tools must therefore be treated as
 * immutable: whoever changes a message's content must make a new object and drop its
 * `metadata.tokenCount`. A count persisted in `metadata.tokenCount[encoding]` is trusted
 * without encoding.
 */
@Injectable()
export class TokenEstimator implements OnApplicationShutdown {
  /** Texts longer than this many characters are counted in a worker by the async methods. */
  readonly workerThreshold: number;
  /** Per encoding: its encoder and its content cache; gone once disposed. */
  private encoders: Map<TokenEncoding, { encoder: TextCounter; cache: ContentCache }> | undefined;
  private messageCache = new WeakMap<object, TokenCounts>();
  private toolCache = new WeakMap<object, TokenCounts>();
  private readonly pool: TokenWorkerPool;
  private closing: Promise<void> | undefined;

  /** Takes both encodings now (start-up), not on first use */
  constructor(@Optional() @Inject(TOKEN_ESTIMATOR_OPTIONS) options?: TokenEstimatorOptions) {
    this.workerThreshold = options?.workerThreshold ?? DEFAULT_WORKER_THRESHOLD;
    this.pool = new TokenWorkerPool(Math.max(1, options?.workers ?? 2));
    this.encoders = new Map(
      TOKEN_ENCODINGS.map((name) => [
        name,
        { encoder: textCounter(name), cache: new ContentCache() },
      ]),
    );
  }

  /** The encoding for a model name (`override` wins); never throws. See `encodingForModel`. */
  encodingFor(model: string, override?: TokenEncoding): TokenEncoding {
    return encodingForModel(model, override);
  }

  /**
   * Tokens of a plain text (special-token markers are counted as ordinary text); a text counted
   * before is not encoded again.
   */
  countText(text: string, encoding: TokenEncoding): number {
    if (!text) return 0;
    const { encoder, cache } = this.encoding(encoding);
    const cached = cache.get(text);
    if (cached !== undefined) return cached;
    let total = 0;
    if (text.length <= MAX_ENCODE_PIECE) total = encoder(text);
    else {
      for (const piece of splitForCounting(text, MAX_ENCODE_PIECE)) {
        total += encoder(piece);
      }
    }
    cache.set(text, total);
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
    return this.remember(message, encoding, this.inlineTotal(messageTexts(message), encoding));
  }

  /** Sum of `countMessage` over the list plus the 3 reply-priming tokens. */
  countMessages(messages: readonly ModelMessage[], encoding: TokenEncoding): number {
    let total = REPLY_PRIMING;
    for (const message of messages) total += this.countMessage(message, encoding);
    return total;
  }

  /**
   * Tokens of the tool definitions: per tool, the JSON of `{ name, description, parameters }`
   * plus 4. 0 for none. Cached per tool definition object (the list is often a fresh copy).
   */
  countTools(tools: readonly ToolDefinition[] | undefined, encoding: TokenEncoding): number {
    if (!tools || tools.length === 0) return 0;
    let total = 0;
    for (const tool of tools) {
      let counts = this.toolCache.get(tool);
      let count = counts?.[encoding];
      if (count === undefined) {
        count = TOOL_DEFINITION_OVERHEAD + this.countText(toolDefinitionJson(tool), encoding);
        if (!counts) this.toolCache.set(tool, (counts = {}));
        counts[encoding] = count;
      }
      total += count;
    }
    return total;
  }

  /** The message's `metadata.tokenCount` to store: other encodings' counts and this one's. */
  persistableCount(message: ModelMessage, encoding: TokenEncoding): TokenCounts {
    const counts: TokenCounts = {};
    for (const name of TOKEN_ENCODINGS) {
      const value = persistedCount(message, name);
      if (value !== undefined) counts[name] = value;
    }
    counts[encoding] = this.countMessage(message, encoding);
    return counts;
  }

  /** `countText`, in a worker for a text over `workerThreshold` chars (inline if one fails). */
  async countTextAsync(text: string, encoding: TokenEncoding): Promise<number> {
    if (text.length <= this.workerThreshold) return this.countText(text, encoding);
    return this.countOffLoop(text, encoding);
  }

  /** Like `countMessage`, counting large texts in a worker; fills the same caches. */
  async countMessageAsync(message: ModelMessage, encoding: TokenEncoding): Promise<number> {
    return this.batch([message], encoding, false);
  }

  /**
   * Like `countMessages`, never stalling the loop: known counts are added at once, uncached texts
   * of up to `workerThreshold` chars in all are counted inline, more in the worker threads
   * whatever the size of each message. Fills the same caches as the synchronous methods.
   */
  async countMessagesAsync(
    messages: readonly ModelMessage[],
    encoding: TokenEncoding,
  ): Promise<number> {
    return this.precount(messages, encoding);
  }

  /**
   * Writes each message's count into its `metadata.tokenCount` (a new object, other encodings'
   * counts kept), for messages the caller owns (history from a store that keeps no counts): a
   * later count is a field read. Uncached texts are counted as `countMessagesAsync` does.
   */
  stampCounts(messages: readonly ModelMessage[], encoding: TokenEncoding): void | Promise<void> {
    return settledOrPending(this.batch(messages, encoding, true));
  }

  /**
   * `countMessagesAsync` with no promise unless worker threads count: the list's count (reply
   * priming included). `each` is told, in order, every message whose count the pass knew at once
   * (stored, remembered, or all its texts cached), not one it had to encode.
   */
  precount(
    messages: readonly ModelMessage[],
    encoding: TokenEncoding,
    each?: (message: ModelMessage, count: number) => void,
  ): number | Promise<number> {
    return plus(REPLY_PRIMING, this.batch(messages, encoding, false, each));
  }

  /** Forgets every cached message and tool-list count (persisted counts are still honoured). */
  clearCache(): void {
    this.messageCache = new WeakMap();
    this.toolCache = new WeakMap();
    for (const { cache } of this.encoders?.values() ?? []) cache.clear();
  }

  /** Whether `dispose()` has run. */
  get disposed(): boolean {
    return this.encoders === undefined;
  }

  /** Terminates the workers. Idempotent; counting afterwards throws. */
  dispose(): Promise<void> {
    if (this.encoders) {
      this.encoders = undefined;
      this.closing = this.pool.close();
    }
    return this.closing ?? Promise.resolve();
  }

  /** Nest shutdown hook: `dispose()`. */
  onApplicationShutdown(): Promise<void> {
    return this.dispose();
  }

  private encoding(encoding: TokenEncoding): { encoder: TextCounter; cache: ContentCache } {
    if (!this.encoders) throw new Error('TokenEstimator is disposed');
    const found = this.encoders.get(encoding);
    if (!found) throw new Error(`Unknown token encoding: ${String(encoding)}`);
    return found;
  }

  /** `countBatch` over `messages`: counts remembered, or stamped into the messages. */
  private batch(
    messages: readonly ModelMessage[],
    encoding: TokenEncoding,
    stamp: boolean,
    each?: (message: ModelMessage, count: number) => void,
  ): number | Promise<number> {
    return countBatch(
      messages,
      stamp ? (m) => persistedCount(m, encoding) : (m) => this.knownCount(m, encoding),
      stamp
        ? (m, count) => stampCount(m, encoding, count)
        : (m, count) => this.remember(m, encoding, count),
      {
        cache: this.encoding(encoding).cache,
        threshold: this.workerThreshold,
        inline: (texts) => this.inlineTotal(texts, encoding),
        offLoop: (texts) => this.offLoopTotal(texts, encoding),
      },
      each,
    );
  }

  /** A message's count from its texts, encoded here. */
  private inlineTotal({ texts, overhead }: MessageTexts, encoding: TokenEncoding): number {
    let total = overhead;
    for (const text of texts) total += this.countText(text, encoding);
    return total;
  }

  /** A message's count from its texts, the uncached ones encoded in the workers. */
  private async offLoopTotal(
    { texts, overhead }: MessageTexts,
    encoding: TokenEncoding,
  ): Promise<number> {
    // Texts over the threshold take the public way, the one `countTextAsync` documents.
    const counts = await Promise.all(
      texts.map((text) =>
        text.length > this.workerThreshold
          ? this.countTextAsync(text, encoding)
          : this.countOffLoop(text, encoding),
      ),
    );
    return counts.reduce((sum, n) => sum + n, overhead);
  }

  /** One text counted in a worker (cached ones are not sent); inline if the worker fails. */
  private async countOffLoop(text: string, encoding: TokenEncoding): Promise<number> {
    const { cache } = this.encoding(encoding);
    const cached = text ? cache.get(text) : 0;
    if (cached !== undefined) return cached;
    const count = await this.pool.countOrInline(text, encoding, () =>
      this.countText(text, encoding),
    );
    cache.set(text, count);
    return count;
  }

  private knownCount(message: ModelMessage, encoding: TokenEncoding): number | undefined {
    // The field first: most messages carry their count (stored, or stamped by the turn).
    return persistedCount(message, encoding) ?? this.messageCache.get(message)?.[encoding];
  }

  private remember(message: ModelMessage, encoding: TokenEncoding, count: number): number {
    const counts = this.messageCache.get(message);
    if (counts) counts[encoding] = count;
    else this.messageCache.set(message, { [encoding]: count });
    return count;
  }
}
