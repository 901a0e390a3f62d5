/** What went wrong in a model call, as far as the user can act on it. */
export type ProviderErrorKind =
  | 'unreachable'
  | 'auth'
  | 'model-not-found'
  | 'context-length'
  | 'rate-limit'
  | 'malformed-stream'
  | 'disconnected'
  | 'server'
  | 'bad-request';

/** Kinds worth another attempt when nothing was streamed yet. */
const RETRYABLE_KINDS: ReadonlySet<ProviderErrorKind> = new Set([
  'unreachable',
  'rate-limit',
  'server',
  'disconnected',
]);

/** Details of a {@link ProviderError}. */
export interface ProviderErrorOptions {
  /** The SDK or network error behind it. */
  cause?: unknown;
  /** HTTP status of the answer, when there was one. */
  status?: number;
  /** Whether another attempt may succeed. @default by kind: unreachable, rate-limit, server, disconnected */
  retryable?: boolean;
  /** Milliseconds the server asked to wait before another attempt (`Retry-After`). */
  retryAfterMs?: number;
}

/**
 * A failed model call. Its `message` is one sentence for the user: what failed and what to do,
 * without line breaks or stack traces, so the agent can show it as the turn's `[error]` notice.
 * The SDK or network error is kept as `cause`.
 */
export class ProviderError extends Error {
  override readonly name = 'ProviderError';
  readonly kind: ProviderErrorKind;
  readonly status?: number;
  readonly retryable: boolean;
  readonly retryAfterMs?: number;

  constructor(kind: ProviderErrorKind, message: string, options: ProviderErrorOptions = {}) {
    super(oneLine(message), options.cause === undefined ? undefined : { cause: options.cause });
    this.kind = kind;
    this.status = options.status;
    this.retryable = options.retryable ?? RETRYABLE_KINDS.has(kind);
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** What a mapping needs to know to write an actionable sentence. */
export interface ErrorContext {
  /** The endpoint as shown to the user (see {@link endpointLabel}). */
  endpoint: string;
  /** The model of the call. */
  model: string;
  /** The wire format, named in the malformed-stream sentence. */
  wire: 'OpenAI-compatible' | 'Anthropic Messages API';
  /** The request timeout, in milliseconds, named in the timeout sentence. */
  timeoutMs: number;
}

/** The error classes of one SDK (`openai` or `@anthropic-ai/sdk`); both have the same shape. */
export interface SdkErrorClasses {
  APIError: abstract new (...args: any[]) => Error;
  APIConnectionError: abstract new (...args: any[]) => Error;
  APIConnectionTimeoutError: abstract new (...args: any[]) => Error;
}

/** Thrown by a stream whose connection closed cleanly before the answer was complete. */
export class StreamTruncatedError extends Error {
  override readonly name = 'StreamTruncatedError';
  constructor() {
    super('The stream ended before the answer was complete');
  }
}

/** `url` without credentials, query or trailing slash: safe to show in a notice. */
export function endpointLabel(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname.replace(/\/+$/, '')}`;
  } catch {
    return url.replace(/[?#].*$/, '').replace(/\/+$/, '');
  }
}

/** Collapses whitespace, turns inner sentence breaks into semicolons, drops the final stop. */
export function oneLine(text: string): string {
  return text
    .replace(/\s+/g, ' ')
    .replace(/([.!?])\s+(?=\S)/g, (_match, stop: string) => (stop === '.' ? '; ' : `${stop} `))
    .replace(/[.\s]+$/, '')
    .trim();
}
