import { trace } from '@opentelemetry/api';
/**
 * Retries of model calls: exponential backoff with full jitter, `Retry-After` honoured (capped),
 * and for streams only while nothing was yielded yet.
 */

/** How often and how long to retry. */
export interface RetryOptions {
  /** Retries after the first attempt. @default 2 */
  maxRetries?: number;
  /** Base of the exponential backoff: retry n waits a random time below `baseDelayMs * 2^n`. @default 500 */
  baseDelayMs?: number;
  /** Longest wait before a retry, `Retry-After` included. @default 30000 */
  maxDelayMs?: number;
  /** Waits `ms` or until `signal` aborts (resolving early). A seam for tests. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** A number in [0, 1) for the jitter. A seam for tests. @default Math.random */
  random?: () => number;
}

/** A resolved {@link RetryOptions}. */
export type RetryPolicy = Required<RetryOptions>;

/** What the caller learns about each retry. */
export interface RetryInfo {
  /** 1 for the first retry. */
  retry: number;
  delayMs: number;
  error: unknown;
}

/** What a retry loop needs besides the policy. */
export interface RetryControl {
  /** Aborts the waiting and the loop. */
  signal: AbortSignal;
  /** Whether `error` deserves another attempt, and how long the server asked to wait. */
  retryable: (error: unknown) => false | { retryAfterMs?: number };
  /** The error to throw when `signal` aborts during a wait. */
  abortError: () => unknown;
  /** Called before each wait. */
  onRetry?: (info: RetryInfo) => void;
  /**
   * Milliseconds left for waits and further attempts (a stream's budget before its first
   * token): a wait at least that long is not made, and the error is thrown at once.
   */
  remainingMs?: () => number;
}

export const DEFAULT_MAX_RETRIES = 2;
export const DEFAULT_BASE_DELAY_MS = 500;
export const DEFAULT_MAX_DELAY_MS = 30_000;

/** Fills in the defaults; negative or non-finite numbers fall back to them. */
export function retryPolicy(options: RetryOptions = {}): RetryPolicy {
  const count = (value: number | undefined, fallback: number) =>
    value !== undefined && Number.isFinite(value) && value >= 0 ? value : fallback;
  return {
    maxRetries: Math.floor(count(options.maxRetries, DEFAULT_MAX_RETRIES)),
    baseDelayMs: count(options.baseDelayMs, DEFAULT_BASE_DELAY_MS),
    maxDelayMs: count(options.maxDelayMs, DEFAULT_MAX_DELAY_MS),
    sleep: options.sleep ?? sleep,
    random: options.random ?? Math.random,
  };
}

/**
 * Milliseconds to wait before retry number `retry` (0 for the first): the server's
 * `retryAfterMs` when given, else a random time in [0, base * 2^retry) ("full jitter"); both
 * capped at `maxDelayMs`.
 */
export function backoffDelay(
  retry: number,
  policy: Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs' | 'random'>,
  retryAfterMs?: number,
): number {
  if (retryAfterMs !== undefined && Number.isFinite(retryAfterMs)) {
    return Math.min(Math.max(0, retryAfterMs), policy.maxDelayMs);
  }
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retry);
  return Math.floor(policy.random() * ceiling);
}

/**
 * Milliseconds a server asks to wait: `retry-after-ms`, else `retry-after` in seconds or as an
 * HTTP date (a past date is 0). `undefined` when absent or unreadable.
 */
export function parseRetryAfter(
  headers: { get(name: string): string | null } | undefined,
  now = Date.now(),
): number | undefined {
  if (!headers) return undefined;
  const msHeader = headers.get('retry-after-ms')?.trim();
  if (msHeader && /^\d+(\.\d+)?$/.test(msHeader)) return Number.parseFloat(msHeader);
  const raw = headers.get('retry-after')?.trim();
  if (!raw) return undefined;
  if (/^\d+(\.\d+)?$/.test(raw)) return Number.parseFloat(raw) * 1000;
  // HTTP dates name a weekday and a month; bare numbers other than the above are invalid.
  const date = /[a-z]/i.test(raw) ? Date.parse(raw) : NaN;
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Waits `ms` milliseconds; resolves early (without throwing) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Waits before a retry, or says that no retry should happen (the error is to be thrown). */
async function waitForRetry(
  error: unknown,
  retry: number,
  policy: RetryPolicy,
  control: RetryControl,
): Promise<boolean> {
  if (control.signal.aborted || retry >= policy.maxRetries) return false;
  const verdict = control.retryable(error);
  if (!verdict) return false;
  const delayMs = backoffDelay(retry, policy, verdict.retryAfterMs);
  if (control.remainingMs && delayMs >= control.remainingMs()) return false;
  control.onRetry?.({ retry: retry + 1, delayMs, error });
  // On the model call's span when tracing runs (no span: nothing).
  trace.getActiveSpan()?.addEvent('agent.retry', {
    'agent.retry.attempt': retry + 1,
    'agent.retry.delay_ms': delayMs,
    'error.type': errorType(error),
  });
  await policy.sleep(delayMs, control.signal);
  if (control.signal.aborted) throw control.abortError();
  return true;
}

/** Calls `call` until it succeeds, a non-retryable error comes, or the retries run out. */
export async function retryCall<T>(
  call: (attempt: number) => Promise<T>,
  policy: RetryPolicy,
  control: RetryControl,
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call(attempt);
    } catch (error) {
      if (!(await waitForRetry(error, attempt, policy, control))) throw error;
    }
  }
}

/**
 * Streams `open(attempt)`, opening it again after a retryable error only while nothing was
 * yielded: once the consumer has seen a chunk, an error ends the stream.
 */
export async function* retryStream<T>(
  open: (attempt: number) => AsyncIterable<T>,
  policy: RetryPolicy,
  control: RetryControl,
): AsyncGenerator<T, void, undefined> {
  for (let attempt = 0; ; attempt++) {
    let yielded = false;
    try {
      for await (const item of open(attempt)) {
        yielded = true;
        yield item;
      }
      return;
    } catch (error) {
      if (yielded || !(await waitForRetry(error, attempt, policy, control))) throw error;
    }
  }
}

/** Timeouts and retries shared by the SDK-based providers. */
export interface ResilienceOptions {
  /**
   * Milliseconds to wait for the response headers (of a non-streaming call, the whole answer,
   * as servers send them with it); a stream also gives up after `idleTimeoutMs` of silence.
   * @default 120000
   */
  timeoutMs?: number;
  /**
   * Longest silence of a stream, in milliseconds: before the response headers, and between
   * chunks (SSE keep-alive comments do not count as chunks). The attempts before the first
   * token share twice this in total, retry waits included. `ChatRequest.idleTimeoutMs`
   * overrides it; 0 disables it. @default 60000
   */
  idleTimeoutMs?: number;
  /** Retries on connection errors, 408/409/429/5xx, before the first streamed token. @default 2 */
  maxRetries?: number;
  /** Base of the exponential backoff with full jitter. @default 500 */
  baseDelayMs?: number;
  /** Cap of every wait, `Retry-After` included. @default 30000 */
  maxRetryDelayMs?: number;
  /** Called before each retry's wait (for logs). */
  onRetry?: (info: RetryInfo) => void;
  /** Test seam: the wait between attempts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Test seam: the jitter source, a number in [0, 1). */
  random?: () => number;
}

export const DEFAULT_TIMEOUT_MS = 120_000;
export const DEFAULT_IDLE_TIMEOUT_MS = 60_000;

/** The idle timeout of one call: the request's own, else the provider's, else the default. */
export function idleTimeoutOf(
  request: { idleTimeoutMs?: number },
  options: ResilienceOptions,
): number {
  return request.idleTimeoutMs ?? options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
}

/** The retry policy of a provider's {@link ResilienceOptions}. */
export function policyOf(options: ResilienceOptions): RetryPolicy {
  return retryPolicy({
    maxRetries: options.maxRetries,
    baseDelayMs: options.baseDelayMs,
    maxDelayMs: options.maxRetryDelayMs,
    sleep: options.sleep,
    random: options.random,
  });
}

/** A short name of what failed, for `error.type` (the HTTP status when there is one). */
function errorType(error: unknown): string {
  const status = (error as { status?: unknown } | undefined)?.status;
  if (typeof status === 'number') return String(status);
  return error instanceof Error ? error.name : typeof error;
}
