import type { ModelMessage } from '../contracts';
import type { ContentCache } from './content-cache';
import { messageTexts, visitTexts, type MessageTexts } from './message-texts';

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
 * `each` is told every message whose count the pass knew at once (stored, remembered or all
 * texts cached), in order; the others are counted after it.
 */
export function countBatch(
  messages: readonly ModelMessage[],
  known: (message: ModelMessage) => number | undefined,
  keep: (message: ModelMessage, count: number) => void,
  counting: TextCounting,
  each?: (message: ModelMessage, count: number) => void,
): number | Promise<number> {
  let total = 0;
  let uncached = 0;
  let open: { message: ModelMessage; texts: MessageTexts }[] | undefined;
  // One visitor for the whole batch: a message whose texts are all cached builds no list.
  let sum = 0;
  const addCached = (text: string): boolean => {
    const cached = text ? counting.cache.get(text) : 0;
    if (cached === undefined) return false;
    sum += cached;
    return true;
  };
  for (const message of messages) {
    let count = known(message);
    if (count === undefined) {
      sum = 0;
      const overhead = visitTexts(message, addCached);
      if (overhead !== undefined) {
        count = overhead + sum;
        keep(message, count);
      }
    }
    if (count !== undefined) {
      total += count;
      each?.(message, count);
      continue;
    }
    const texts = messageTexts(message);
    for (const text of texts.texts) {
      if (text && counting.cache.get(text) === undefined) uncached += text.length;
    }
    (open ??= []).push({ message, texts });
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
