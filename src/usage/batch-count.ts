import type { ModelMessage } from '../contracts';
import type { ContentCache } from './content-cache';
import { MESSAGE_OVERHEAD, messageTexts, type MessageTexts } from './message-texts';

/** How `countBatch` counts the texts it finds no count for. */
export interface TextCounting {
  /** Counts by content of the batch's encoding. */
  cache: ContentCache;
  /** Uncached characters up to which a batch is counted inline. */
  threshold: number;
  /** A message's count from its texts, encoded here. */
  inline(texts: MessageTexts): number;
  /** A message's count from its texts, the uncached ones encoded in worker threads. */
  offLoop(texts: MessageTexts): Promise<number>;
}

/**
 * The sum of the counts of `messages`, one pass: a message with a `known` count adds it; one
 * whose texts are all in the content cache adds their sum at once; the rest are counted inline
 * when their uncached texts add up to at most `threshold` characters (a few milliseconds of
 * encoding), else in the worker threads, whatever the size of each message. Every message
 * counted here is handed to `keep` with its count. No promise is made unless a worker is used.
 */
export function countBatch(
  messages: readonly ModelMessage[],
  known: (message: ModelMessage) => number | undefined,
  keep: (message: ModelMessage, count: number) => void,
  counting: TextCounting,
): number | Promise<number> {
  let total = 0;
  let uncached = 0;
  let open: { message: ModelMessage; texts: MessageTexts }[] | undefined;
  for (const message of messages) {
    const count = known(message);
    if (count !== undefined) {
      total += count;
      continue;
    }
    const quick = cachedPlain(message, counting.cache);
    if (quick !== undefined) {
      keep(message, quick);
      total += quick;
      continue;
    }
    const texts = messageTexts(message);
    let sum = texts.overhead;
    let missing = 0;
    for (const text of texts.texts) {
      const cached = text ? counting.cache.get(text) : 0;
      if (cached === undefined) missing += text.length;
      else sum += cached;
    }
    if (missing === 0) {
      keep(message, sum);
      total += sum;
    } else {
      (open ??= []).push({ message, texts });
      uncached += missing;
    }
  }
  if (!open) return total;
  if (uncached <= counting.threshold) {
    for (const { message, texts } of open) {
      const count = counting.inline(texts);
      keep(message, count);
      total += count;
    }
    return total;
  }
  const pending = open;
  return Promise.all(pending.map(({ texts }) => counting.offLoop(texts))).then((counts) => {
    pending.forEach(({ message }, i) => keep(message, counts[i]));
    return counts.reduce((sum, n) => sum + n, total);
  });
}

/** Nothing for a count already made, a promise of nothing for one still being made. */
export function settledOrPending(count: number | Promise<number>): void | Promise<void> {
  if (typeof count !== 'number') return count.then(() => undefined);
}

/** `extra` added to a count made now, or to one still being made. */
export function plus(extra: number, count: number | Promise<number>): number | Promise<number> {
  return typeof count === 'number' ? extra + count : count.then((n) => extra + n);
}

/**
 * The count of a plain message (text content, no reasoning, no tool calls) whose role and
 * content are both in the cache, without building its `messageTexts`; `undefined` otherwise.
 */
function cachedPlain(message: ModelMessage, cache: ContentCache): number | undefined {
  const { role, content } = message;
  if (typeof role !== 'string' || typeof content !== 'string') return undefined;
  if (message.reasoningContent || message.toolCalls?.length) return undefined;
  const forRole = role ? cache.get(role) : 0;
  const forContent = content ? cache.get(content) : 0;
  if (forRole === undefined || forContent === undefined) return undefined;
  return MESSAGE_OVERHEAD + forRole + forContent;
}
