import {
  ProviderError,
  StreamTruncatedError,
  type ErrorContext,
  type SdkErrorClasses,
} from './provider-error';
import {
  contextTooLong,
  disconnected,
  failedMidAnswer,
  forbidden,
  malformed,
  modelNotFound,
  quotaExhausted,
  rateLimited,
  rateLimitedMidAnswer,
  rejected,
  rejectedMidAnswer,
  serverFailed,
  timedOut,
  unauthorized,
  unexpected,
  unreachable,
} from './provider-error.sentences';
import { parseRetryAfter } from './retry';

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
  const cause = error;
  if (error instanceof sdk.APIConnectionTimeoutError) return timedOut(ctx, cause);
  if (error instanceof sdk.APIConnectionError) return unreachable(ctx, cause);
  if (error instanceof sdk.APIError) return fromApiError(error, ctx);
  if (error instanceof SyntaxError || (error as { name?: unknown })?.name === 'SyntaxError') {
    return malformed(ctx, 'a chunk is not valid JSON', cause);
  }
  if (isDroppedConnection(error)) return disconnected(ctx, cause);
  const message = (error as { message?: unknown })?.message;
  return unexpected(ctx, typeof message === 'string' ? message : String(error), cause);
}

function fromApiError(error: Error, ctx: ErrorContext): ProviderError {
  const info = apiErrorInfo(error);
  const status = info.status;
  const cause = error;
  const text = `${info.message ?? ''} ${info.code ?? ''} ${info.type ?? ''}`;
  const retryAfterMs = parseRetryAfter(info.headers);
  const shouldRetry = info.headers?.get('x-should-retry');
  const retryable = shouldRetry === 'false' ? false : shouldRetry === 'true' ? true : undefined;
  const opts = { cause, status, retryAfterMs, retryable };

  if (status === undefined) return midStreamError(info, ctx, cause);
  if (status === 401) return unauthorized(ctx, opts);
  if (status === 403) return forbidden(ctx, info.message, opts);
  // Only client errors: rate-limit answers speak of "tokens per minute" too.
  const clientError = status === 400 || status === 404 || status === 422;
  if (
    info.code === 'context_length_exceeded' ||
    status === 413 ||
    (clientError && CONTEXT_LENGTH.test(text))
  ) {
    return contextTooLong(ctx, opts);
  }
  if (
    status === 404 ||
    info.code === 'model_not_found' ||
    (clientError && MODEL_NOT_FOUND.test(text))
  ) {
    return modelNotFound(ctx, status, opts);
  }
  if (status === 429) {
    if (info.code === 'insufficient_quota' || /quota|billing|credit balance/i.test(text)) {
      return quotaExhausted(ctx, info.message, opts);
    }
    return rateLimited(ctx, opts);
  }
  if (status >= 500 || status === 408 || status === 409) {
    const overloaded = status === 529 || info.type === 'overloaded_error';
    return serverFailed(ctx, status, overloaded, info.message, opts);
  }
  return rejected(ctx, status, info.message, opts);
}

/** An error reported inside a stream (an OpenAI `error` chunk or an Anthropic `error` event). */
function midStreamError(info: ApiErrorInfo, ctx: ErrorContext, cause: unknown): ProviderError {
  const text = `${info.message ?? ''} ${info.code ?? ''} ${info.type ?? ''}`;
  if (CONTEXT_LENGTH.test(text)) return contextTooLong(ctx, { cause });
  const what = [info.type, info.message].filter(Boolean).join(': ');
  if (/rate_limit|rate limit/i.test(text)) return rateLimitedMidAnswer(ctx, what, cause);
  if (/invalid_request|bad_request|authentication|permission/i.test(text)) {
    return rejectedMidAnswer(ctx, what, cause);
  }
  return failedMidAnswer(ctx, what, cause);
}
