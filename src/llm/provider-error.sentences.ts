import {
  oneLine,
  ProviderError,
  type ErrorContext,
  type ProviderErrorOptions,
} from './provider-error';
import type { Silence } from './call-signal';

/** A server's own error text, made short enough to quote inside a sentence. */
function quote(text: string | undefined, max = 100): string {
  if (!text) return '';
  const line = oneLine(text);
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** The endpoint did not answer within the request timeout. */
export function timedOut(ctx: ErrorContext, cause: unknown): ProviderError {
  return new ProviderError(
    'unreachable',
    `The model endpoint ${ctx.endpoint} did not answer within ${Math.round(ctx.timeoutMs / 1000)} s: check that the server is running and not overloaded, or raise the provider's timeoutMs`,
    { cause },
  );
}

/** No connection to the endpoint could be made. */
export function unreachable(ctx: ErrorContext, cause: unknown): ProviderError {
  return new ProviderError(
    'unreachable',
    `The model endpoint ${ctx.endpoint} cannot be reached: check LLM_BASE_URL and that the server is running`,
    { cause },
  );
}

/** A failure of no known kind; `detail` is the error's own message, quoted. */
export function unexpected(ctx: ErrorContext, detail: string, cause: unknown): ProviderError {
  const quoted = quote(detail);
  return new ProviderError(
    'server',
    `The call to model "${ctx.model}" on ${ctx.endpoint} failed unexpectedly (${quoted || 'no detail'}): try again, and check the server's logs if it persists`,
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

/** `ms` as the user reads it: `0.05 s`, `1.5 s`, `60 s`. */
export function seconds(ms: number): string {
  const s = ms / 1000;
  return `${s >= 10 ? Math.round(s) : Number(s.toPrecision(2))} s`;
}

/**
 * The endpoint went silent: longer than the idle timeout before the answer started or between
 * two chunks, or the attempts before the first token used up their shared budget.
 */
export function stalled(ctx: ErrorContext, silence: Silence, cause?: unknown): ProviderError {
  const endpoint = `The model endpoint ${ctx.endpoint}`;
  if (silence.midAnswer) {
    return new ProviderError(
      'disconnected',
      `${endpoint} went silent for ${seconds(silence.idleTimeoutMs)} in the middle of an answer: try again, and check that the server is not overloaded`,
      { cause },
    );
  }
  const what =
    silence.reason === 'budget'
      ? `before answering (no token within ${seconds(silence.elapsedMs)} over ${silence.attempts} attempt${silence.attempts === 1 ? '' : 's'})`
      : `for ${seconds(silence.idleTimeoutMs)} before answering`;
  return new ProviderError(
    'disconnected',
    `${endpoint} went silent ${what}: check that the server is running and not overloaded, or raise the idle timeout`,
    { cause },
  );
}

/**
 * A 200 answer to a streaming request that is neither a stream nor a JSON completion (a login
 * page, a proxy's notice): the base URL points somewhere else than the model API.
 */
export function notAStream(ctx: ErrorContext, contentType: string): ProviderError {
  return new ProviderError(
    'malformed-stream',
    `The model endpoint ${ctx.endpoint} answered ${quote(contentType, 60)} instead of a stream: check that LLM_BASE_URL is the address of an ${ctx.wire} server`,
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

/** 401: the API key was rejected. */
export function unauthorized(ctx: ErrorContext, options: ProviderErrorOptions): ProviderError {
  return new ProviderError(
    'auth',
    `The model endpoint ${ctx.endpoint} rejected the API key (401 Unauthorized): check LLM_API_KEY`,
    options,
  );
}

/** 403: the key may not do this; `message` is the server's own text. */
export function forbidden(
  ctx: ErrorContext,
  message: string | undefined,
  options: ProviderErrorOptions,
): ProviderError {
  const said = quote(message);
  return new ProviderError(
    'auth',
    `The model endpoint ${ctx.endpoint} refused access (403 Forbidden${said ? `: ${said}` : ''}): check that LLM_API_KEY may use model "${ctx.model}"`,
    options,
  );
}

/** The conversation does not fit the model's context window. */
export function contextTooLong(ctx: ErrorContext, options: ProviderErrorOptions): ProviderError {
  return new ProviderError(
    'context-length',
    `The conversation is too long for the context window of model "${ctx.model}": start a new session, or lower the history limit or the model's contextWindow setting`,
    options,
  );
}

/** The endpoint does not know the model. */
export function modelNotFound(
  ctx: ErrorContext,
  status: number,
  options: ProviderErrorOptions,
): ProviderError {
  return new ProviderError(
    'model-not-found',
    `The endpoint ${ctx.endpoint} does not know the model "${ctx.model}" (${status}): check LLM_MODEL or the model assigned to this session, and that LLM_BASE_URL is the API root`,
    options,
  );
}

/** 429 for an exhausted quota: waiting does not help, so it is never retried. */
export function quotaExhausted(
  ctx: ErrorContext,
  message: string | undefined,
  options: ProviderErrorOptions,
): ProviderError {
  const said = quote(message);
  return new ProviderError(
    'rate-limit',
    `The API key for ${ctx.endpoint} has no quota left (429${said ? `: ${said}` : ''}): check the account's plan and billing`,
    { ...options, retryable: false },
  );
}

/** 429: too many requests. */
export function rateLimited(ctx: ErrorContext, options: ProviderErrorOptions): ProviderError {
  return new ProviderError(
    'rate-limit',
    `The model endpoint ${ctx.endpoint} is rate-limiting requests (429): wait a minute and try again, or check the API plan's rate limits`,
    options,
  );
}

/** 5xx, 408 or 409: the server failed, or said it is overloaded. */
export function serverFailed(
  ctx: ErrorContext,
  status: number,
  overloaded: boolean,
  message: string | undefined,
  options: ProviderErrorOptions,
): ProviderError {
  const what = overloaded ? 'is overloaded' : 'failed';
  const said = quote(message);
  return new ProviderError(
    'server',
    `The model endpoint ${ctx.endpoint} ${what} (${status}${said ? `: ${said}` : ''}): try again in a moment, and check the server's logs if it persists`,
    options,
  );
}

/** Any other answer: the request itself was refused, so it is never retried. */
export function rejected(
  ctx: ErrorContext,
  status: number,
  message: string | undefined,
  options: ProviderErrorOptions,
): ProviderError {
  const said = quote(message);
  return new ProviderError(
    'bad-request',
    `The model endpoint ${ctx.endpoint} rejected the request (${status}${said ? `: ${said}` : ''}): check that model "${ctx.model}" supports the features in use, such as tools or images`,
    { ...options, retryable: false },
  );
}

/** The label of an error reported inside a stream: its type and message, quoted. */
function midStreamLabel(what: string): string {
  return quote(what) || 'no detail';
}

/** A rate limit reported inside a stream; `what` is the error's type and message. */
export function rateLimitedMidAnswer(
  ctx: ErrorContext,
  what: string,
  cause: unknown,
): ProviderError {
  return new ProviderError(
    'rate-limit',
    `The model endpoint ${ctx.endpoint} is rate-limiting requests (${midStreamLabel(what)}): wait a minute and try again`,
    { cause },
  );
}

/** A refused request reported inside a stream; `what` is the error's type and message. */
export function rejectedMidAnswer(ctx: ErrorContext, what: string, cause: unknown): ProviderError {
  return new ProviderError(
    'bad-request',
    `The model endpoint ${ctx.endpoint} rejected the request mid-answer (${midStreamLabel(what)}): check the model settings and try again`,
    { cause },
  );
}

/** Any other error reported inside a stream; `what` is the error's type and message. */
export function failedMidAnswer(ctx: ErrorContext, what: string, cause: unknown): ProviderError {
  return new ProviderError(
    'server',
    `The model endpoint ${ctx.endpoint} reported an error mid-answer (${midStreamLabel(what)}): try again in a moment, and check the server's logs if it persists`,
    { cause },
  );
}
