import {
  endpointLabel,
  ProviderError,
  StreamTruncatedError,
} from '../../../src/llm/provider-error';
import { toProviderError } from '../../../src/llm/provider-error.classification';

class APIError extends Error {
  constructor(
    readonly status: number | undefined,
    readonly error: unknown,
    readonly headers?: Headers,
  ) {
    super(`${status} ${JSON.stringify(error)}`);
  }
}
class APIConnectionError extends APIError {}
class APIConnectionTimeoutError extends APIConnectionError {}
const sdk = { APIError, APIConnectionError, APIConnectionTimeoutError };
const ctx = {
  endpoint: 'http://127.0.0.1:1/v1',
  model: 'm',
  wire: 'OpenAI-compatible' as const,
  timeoutMs: 120_000,
};

describe('ProviderError', () => {
  it('keeps its message on one line, as one sentence without a final stop', () => {
    const error = new ProviderError('server', 'Broke.\nBadly.  Try again.  ', { status: 500 });

    expect(error.message).toBe('Broke; Badly; Try again');
    expect(error).toMatchObject({ name: 'ProviderError', kind: 'server', status: 500 });
    expect(error).toBeInstanceOf(Error);
  });

  it('is retryable by kind unless told otherwise', () => {
    expect(new ProviderError('unreachable', 'x').retryable).toBe(true);
    expect(new ProviderError('rate-limit', 'x').retryable).toBe(true);
    expect(new ProviderError('disconnected', 'x').retryable).toBe(true);
    expect(new ProviderError('auth', 'x').retryable).toBe(false);
    expect(new ProviderError('malformed-stream', 'x').retryable).toBe(false);
    expect(new ProviderError('server', 'x', { retryable: false }).retryable).toBe(false);
  });

  it('keeps the cause', () => {
    const cause = new Error('socket');
    expect(new ProviderError('disconnected', 'x', { cause }).cause).toBe(cause);
  });
});

describe('toProviderError', () => {
  it.each([
    [
      new APIConnectionTimeoutError(undefined, undefined),
      'unreachable',
      'did not answer within 120 s',
    ],
    [new APIConnectionError(undefined, undefined), 'unreachable', 'cannot be reached'],
    [new APIError(401, { message: 'no' }), 'auth', 'check LLM_API_KEY'],
    [new APIError(404, { message: 'no such model' }), 'model-not-found', 'check LLM_MODEL'],
    [
      new APIError(400, { code: 'context_length_exceeded' }),
      'context-length',
      'start a new session',
    ],
    [new APIError(413, {}), 'context-length', 'start a new session'],
    [new APIError(429, {}), 'rate-limit', 'wait a minute'],
    [new APIError(500, {}), 'server', 'failed (500)'],
    [new APIError(408, {}), 'server', 'failed (408)'],
    [new APIError(422, { message: 'bad' }), 'bad-request', 'rejected the request (422: bad)'],
    [
      new APIError(undefined, { type: 'overloaded_error', message: 'Overloaded' }),
      'server',
      'mid-answer (overloaded_error: Overloaded)',
    ],
    [
      new APIError(undefined, { type: 'rate_limit_error', message: 'slow' }),
      'rate-limit',
      'rate-limiting',
    ],
    [new SyntaxError('Unexpected token'), 'malformed-stream', 'not valid JSON'],
    [new StreamTruncatedError(), 'disconnected', 'closed the connection'],
    [
      Object.assign(new TypeError('terminated'), { cause: { code: 'UND_ERR_SOCKET' } }),
      'disconnected',
      'closed the connection',
    ],
    [new Error('weird'), 'server', 'failed unexpectedly (weird)'],
  ])('maps %p to %s', (error, kind, text) => {
    const mapped = toProviderError(error, ctx, sdk);

    expect(mapped.kind).toBe(kind);
    expect(mapped.message).toContain(text);
    expect(mapped.message).not.toContain('\n');
    expect(mapped.cause).toBe(error);
  });

  it('reads Retry-After and x-should-retry', () => {
    const limited = toProviderError(
      new APIError(429, {}, new Headers({ 'retry-after': '3' })),
      ctx,
      sdk,
    );
    const told = toProviderError(
      new APIError(500, {}, new Headers({ 'x-should-retry': 'false' })),
      ctx,
      sdk,
    );

    expect(limited).toMatchObject({ retryAfterMs: 3000, retryable: true });
    expect(told.retryable).toBe(false);
  });

  it('returns a ProviderError unchanged', () => {
    const error = new ProviderError('auth', 'x');
    expect(toProviderError(error, ctx, sdk)).toBe(error);
  });
});

describe('endpointLabel', () => {
  it('drops credentials, query and trailing slashes', () => {
    expect(endpointLabel('https://user:secret@api.example.com/v1/?key=abc#x')).toBe(
      'https://api.example.com/v1',
    );
    expect(endpointLabel('http://127.0.0.1:1/v1')).toBe('http://127.0.0.1:1/v1');
    expect(endpointLabel('not a url/?q=1')).toBe('not a url');
  });
});
