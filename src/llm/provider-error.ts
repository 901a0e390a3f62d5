import { parseRetryAfter } from './retry';

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
function oneLine(text: string): string {
  return text
    .replace(/\s+/g, ' ')
    .replace(/([.!?])\s+(?=\S)/g, (_match, stop: string) => (stop === '.' ? '; ' : `${stop} `))
    .replace(/[.\s]+$/, '')
    .trim();
}

/** A server's own error text, made short enough to quote inside a sentence. */
function quote(text: string | undefined, max = 100): string {
  if (!text) return '';
  const line = oneLine(text);
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

const CONTEXT_LENGTH =
  /context[_ -]?length|context window|maximum context|prompt is too long|too many tokens|input is too long|exceeds? (?:the )?(?:model'?s? )?(?:maximum )?(?:context|token limit)|reduce the length of the messages/i;
const MODEL_NOT_FOUND =
  /model[^.]{0,80}(?:not found|does not exist|is not available)|unknown model|invalid model|no such model/i;

/** Status, body fields and headers of an SDK `APIError`, read by shape. */
interface ApiErrorInfo {
  status?: number;
  message?: string;
  type?: string;
  code?: string;
  headers?: { get(name: string): string | null };
}

function apiErrorInfo(error: any): ApiErrorInfo {
  const body = error?.error;
  const inner = body && typeof body.error === 'object' && body.error ? body.error : body;
  const str = (value: unknown) => (typeof value === 'string' && value ? value : undefined);
  return {
    status: typeof error?.status === 'number' ? error.status : undefined,
    message: str(inner?.message) ?? str(error?.apiMessage),
    type: str(inner?.type) ?? str(error?.type),
    code:
      str(inner?.code) ??
      str(inner?.details?.error_code) ??
      str(error?.code) ??
      str(error?.errorCode) ??
      (typeof inner?.code === 'number' ? String(inner.code) : undefined),
    headers: typeof error?.headers?.get === 'function' ? error.headers : undefined,
  };
}

/** Network error codes of Node and undici, searched along the `cause` chain. */
function networkCode(error: unknown): string | undefined {
  let current: any = error;
  for (let depth = 0; current && depth < 5; depth++) {
    if (typeof current.code === 'string' && /^(E[A-Z]+|UND_ERR)/.test(current.code)) {
      return current.code;
    }
    current = current.cause;
  }
  return undefined;
}

/** Whether an error is a connection dropped while reading (undici's `terminated`, resets). */
export function isDroppedConnection(error: unknown): boolean {
  if (error instanceof StreamTruncatedError) return true;
  const code = networkCode(error);
  if (code && /ECONNRESET|EPIPE|ECONNABORTED|UND_ERR_SOCKET|UND_ERR_ABORTED|ETIMEDOUT/.test(code)) {
    return true;
  }
  const raw = (error as { message?: unknown })?.message;
  const message = typeof raw === 'string' ? raw : '';
  return /terminated|other side closed|socket hang up|premature close|aborted/i.test(message);
}

/**
 * Maps an SDK, network or stream error of one model call to a {@link ProviderError}. An abort
 * must be handled before calling this: it stays an abort.
 */
export function toProviderError(
  error: unknown,
  ctx: ErrorContext,
  sdk: SdkErrorClasses,
): ProviderError {
  if (error instanceof ProviderError) return error;
  const { endpoint, model } = ctx;
  const cause = error;
  if (error instanceof sdk.APIConnectionTimeoutError) {
    return new ProviderError(
      'unreachable',
      `The model endpoint ${endpoint} did not answer within ${Math.round(ctx.timeoutMs / 1000)} s: check that the server is running and not overloaded, or raise the provider's timeoutMs`,
      { cause },
    );
  }
  if (error instanceof sdk.APIConnectionError) {
    return new ProviderError(
      'unreachable',
      `The model endpoint ${endpoint} cannot be reached: check LLM_BASE_URL and that the server is running`,
      { cause },
    );
  }
  if (error instanceof sdk.APIError) return fromApiError(error, ctx);
  if (error instanceof SyntaxError || (error as { name?: unknown })?.name === 'SyntaxError') {
    return new ProviderError(
      'malformed-stream',
      `The model endpoint ${endpoint} sent a malformed stream (a chunk is not valid JSON): check that LLM_BASE_URL is the address of an ${ctx.wire} server`,
      { cause },
    );
  }
  if (isDroppedConnection(error)) return disconnected(ctx, cause);
  const message = (error as { message?: unknown })?.message;
  const detail = quote(typeof message === 'string' ? message : String(error));
  return new ProviderError(
    'server',
    `The call to model "${model}" on ${endpoint} failed unexpectedly (${detail || 'no detail'}): try again, and check the server's logs if it persists`,
    { cause, retryable: false },
  );
}

/** The connection closed before the answer was complete. */
export function disconnected(ctx: ErrorContext, cause?: unknown): ProviderError {
  return new ProviderError(
    'disconnected',
    `The model endpoint ${ctx.endpoint} closed the connection before the answer was complete: try again, and check the server's logs if it keeps happening`,
    { cause },
  );
}

/** The stream went silent for longer than the idle timeout. */
export function stalled(ctx: ErrorContext, idleMs: number, cause?: unknown): ProviderError {
  return new ProviderError(
    'disconnected',
    `The model endpoint ${ctx.endpoint} sent nothing for ${Math.round(idleMs / 1000)} s in the middle of an answer: try again, and check that the server is not overloaded`,
    { cause },
  );
}

/** The stream broke the wire format's rules. */
export function malformed(ctx: ErrorContext, what: string, cause?: unknown): ProviderError {
  return new ProviderError(
    'malformed-stream',
    `The model endpoint ${ctx.endpoint} sent a malformed stream (${what}): check that LLM_BASE_URL is the address of an ${ctx.wire} server`,
    { cause },
  );
}

function fromApiError(error: Error, ctx: ErrorContext): ProviderError {
  const { endpoint, model } = ctx;
  const info = apiErrorInfo(error);
  const status = info.status;
  const cause = error;
  const text = `${info.message ?? ''} ${info.code ?? ''} ${info.type ?? ''}`;
  const said = quote(info.message);
  const retryAfterMs = parseRetryAfter(info.headers);
  const shouldRetry = info.headers?.get('x-should-retry');
  const retryable = shouldRetry === 'false' ? false : shouldRetry === 'true' ? true : undefined;
  const opts = { cause, status, retryAfterMs, retryable };

  if (status === undefined) return midStreamError(info, ctx, cause);
  if (status === 401) {
    return new ProviderError(
      'auth',
      `The model endpoint ${endpoint} rejected the API key (401 Unauthorized): check LLM_API_KEY`,
      opts,
    );
  }
  if (status === 403) {
    return new ProviderError(
      'auth',
      `The model endpoint ${endpoint} refused access (403 Forbidden${said ? `: ${said}` : ''}): check that LLM_API_KEY may use model "${model}"`,
      opts,
    );
  }
  // Only client errors: rate-limit answers speak of "tokens per minute" too.
  const clientError = status === 400 || status === 404 || status === 422;
  if (
    info.code === 'context_length_exceeded' ||
    status === 413 ||
    (clientError && CONTEXT_LENGTH.test(text))
  ) {
    return new ProviderError(
      'context-length',
      `The conversation is too long for the context window of model "${model}": start a new session, or lower the history limit or the model's contextWindow setting`,
      opts,
    );
  }
  if (
    status === 404 ||
    info.code === 'model_not_found' ||
    (clientError && MODEL_NOT_FOUND.test(text))
  ) {
    return new ProviderError(
      'model-not-found',
      `The endpoint ${endpoint} does not know the model "${model}" (${status}): check LLM_MODEL or the model assigned to this session, and that LLM_BASE_URL is the API root`,
      opts,
    );
  }
  if (status === 429) {
    if (info.code === 'insufficient_quota' || /quota|billing|credit balance/i.test(text)) {
      return new ProviderError(
        'rate-limit',
        `The API key for ${endpoint} has no quota left (429${said ? `: ${said}` : ''}): check the account's plan and billing`,
        { ...opts, retryable: false },
      );
    }
    return new ProviderError(
      'rate-limit',
      `The model endpoint ${endpoint} is rate-limiting requests (429): wait a minute and try again, or check the API plan's rate limits`,
      opts,
    );
  }
  if (status >= 500 || status === 408 || status === 409) {
    const what = status === 529 || info.type === 'overloaded_error' ? 'is overloaded' : 'failed';
    return new ProviderError(
      'server',
      `The model endpoint ${endpoint} ${what} (${status}${said ? `: ${said}` : ''}): try again in a moment, and check the server's logs if it persists`,
      opts,
    );
  }
  return new ProviderError(
    'bad-request',
    `The model endpoint ${endpoint} rejected the request (${status}${said ? `: ${said}` : ''}): check that model "${model}" supports the features in use, such as tools or images`,
    { ...opts, retryable: false },
  );
}

/** An error reported inside a stream (an OpenAI `error` chunk or an Anthropic `error` event). */
function midStreamError(info: ApiErrorInfo, ctx: ErrorContext, cause: unknown): ProviderError {
  const text = `${info.message ?? ''} ${info.code ?? ''} ${info.type ?? ''}`;
  if (CONTEXT_LENGTH.test(text)) {
    return new ProviderError(
      'context-length',
      `The conversation is too long for the context window of model "${ctx.model}": start a new session, or lower the history limit or the model's contextWindow setting`,
      { cause },
    );
  }
  const label = quote([info.type, info.message].filter(Boolean).join(': ')) || 'no detail';
  if (/rate_limit|rate limit/i.test(text)) {
    return new ProviderError(
      'rate-limit',
      `The model endpoint ${ctx.endpoint} is rate-limiting requests (${label}): wait a minute and try again`,
      { cause },
    );
  }
  if (/invalid_request|bad_request|authentication|permission/i.test(text)) {
    return new ProviderError(
      'bad-request',
      `The model endpoint ${ctx.endpoint} rejected the request mid-answer (${label}): check the model settings and try again`,
      { cause },
    );
  }
  return new ProviderError(
    'server',
    `The model endpoint ${ctx.endpoint} reported an error mid-answer (${label}): try again in a moment, and check the server's logs if it persists`,
    { cause },
  );
}
